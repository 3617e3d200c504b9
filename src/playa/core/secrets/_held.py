"""What is derived from each secret the process holds (its literal forms, its decoders), kept
only while it is held.

A chat's redactor and the log gate both learn a chat's credentials when it opens, and the
redactor again at each change of them, so each value's forms are worth computing once. They are
kept for exactly as long as an :class:`~._outbound.OutboundSecrets` counts the value, and go when
its last holder lets go: a cache keyed by the value itself (an ``lru_cache``) would keep a closed
chat's credentials, and every encoding of them, in memory for the life of the process. A value
nobody holds (a test's, a one-off redactor's) is derived anew each time and kept nowhere.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from ._decode import _Decoder, _decoders
from ._forms import _plain_forms

__all__ = ["decoders_of", "forget", "forms_of", "keep"]

_T = TypeVar("_T")


class _Once(Generic[_T]):
    """What ``derive`` makes of a held value, made on first use and kept.

    Two threads may both make it: the same result, and cheaper than a lock held meanwhile.
    """

    __slots__ = ("_derive", "_made", "_value")

    def __init__(self, derive: Callable[[str], _T], value: str) -> None:
        self._derive = derive
        self._value = value
        self._made: _T | None = None

    def get(self) -> _T:
        if self._made is None:
            self._made = self._derive(self._value)
        return self._made


class _Derived:
    __slots__ = ("decoders", "forms", "holders")

    def __init__(self, value: str) -> None:
        self.holders = 1
        self.forms = _Once(_plain_forms, value)
        self.decoders = _Once(_decoders, value)


_HELD: dict[str, _Derived] = {}
_lock = threading.Lock()


def keep(value: str) -> None:
    """A registry holds ``value`` from now on: what is derived from it is kept until ``forget``."""
    with _lock:
        derived = _HELD.get(value)
        if derived is None:
            _HELD[value] = _Derived(value)
        else:
            derived.holders += 1


def forget(value: str) -> None:
    """Undo one ``keep(value)``; the last one drops all that was derived from it."""
    with _lock:
        derived = _HELD.get(value)
        if derived is not None:
            derived.holders -= 1
            if not derived.holders:
                del _HELD[value]


def forms_of(value: str) -> frozenset[str]:
    """``value``'s literal forms (``_forms``), kept while it is held."""
    derived = _HELD.get(value)
    return _plain_forms(value) if derived is None else derived.forms.get()


def decoders_of(value: str) -> tuple[_Decoder, ...]:
    """``value``'s decoders (``_decode``), kept while it is held."""
    derived = _HELD.get(value)
    return _decoders(value) if derived is None else derived.decoders.get()
