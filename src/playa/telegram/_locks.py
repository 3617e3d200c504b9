"""One lock a chat, made when first needed: what keeps a chat's replies, or its serving, in order."""

from __future__ import annotations

import anyio

__all__ = ["ChatLocks"]


class ChatLocks:
    """The lock of each chat, made when first needed and dropped when the chat leaves."""

    def __init__(self) -> None:
        self._locks: dict[int, anyio.Lock] = {}

    def of(self, chat_id: int) -> anyio.Lock:
        """The lock of ``chat_id`` (made now if it has none)."""
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = anyio.Lock()
        return lock

    def forget(self, chat_id: int) -> None:
        """Drop the lock of ``chat_id``, held or not."""
        self._locks.pop(chat_id, None)

    def forget_unused(self, chat_id: int) -> None:
        """Drop the lock of ``chat_id`` unless a task holds it."""
        lock = self._locks.get(chat_id)
        if lock is not None and not lock.locked():
            del self._locks[chat_id]
