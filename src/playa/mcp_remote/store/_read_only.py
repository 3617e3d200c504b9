"""Read-only maps for the frozen records of a chat's servers."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, TypeVar, cast

__all__ = ["read_only"]

K = TypeVar("K")
V = TypeVar("V")

_EMPTY: Final[Mapping[Any, Any]] = MappingProxyType({})


def read_only(items: dict[K, V]) -> Mapping[K, V]:
    """A read-only view of ``items``, a dict the caller made for it; or, when empty, one view that
    every record shares: an entry holds several maps (headers, policies, pins), most of them empty,
    and a host holds every open chat's entries."""
    return MappingProxyType(items) if items else cast(Mapping[K, V], _EMPTY)
