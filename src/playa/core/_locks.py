"""One lock a key, made when first needed: what keeps the work of one chat, or one server, in order."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

import anyio

__all__ = ["KeyedLocks"]

K = TypeVar("K", bound=Hashable)


class KeyedLocks(Generic[K]):
    """The lock of each key (a chat, a server), made when first needed and dropped when it leaves."""

    def __init__(self) -> None:
        self._locks: dict[K, anyio.Lock] = {}

    def of(self, key: K) -> anyio.Lock:
        """The lock of ``key`` (made now if it has none)."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = anyio.Lock()
        return lock

    def forget(self, key: K) -> None:
        """Drop the lock of ``key``, held or not."""
        self._locks.pop(key, None)

    def forget_unused(self, key: K) -> None:
        """Drop the lock of ``key`` unless a task holds it."""
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]
