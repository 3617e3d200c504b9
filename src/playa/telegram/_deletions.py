"""Deleting a chat's messages that carry a credential: once per message, however many ask."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup

from ._outbox import Outbox

__all__ = ["Deletions"]


@dataclass(eq=False)
class _Deletion:
    done: anyio.Event = field(default_factory=anyio.Event)
    ok: bool = False


class Deletions:
    """Deletions by (chat, message): one Bot API call per message, however many ask for it.

    The dispatcher deletes a message that carries a credential as soon as it arrives, before
    its turn in the chat's queue; the host asks again later and gets the same outcome.
    """

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._known: dict[tuple[int, int], _Deletion] = {}

    def start(self, tg: TaskGroup, chat_id: int, message_id: int) -> None:
        """Begin deleting a message now, in ``tg``; a later ``delete`` waits for this one."""
        key = (chat_id, message_id)
        if key not in self._known:
            deletion = self._known[key] = _Deletion()
            tg.start_soon(self._run, chat_id, message_id, deletion)

    async def delete(self, chat_id: int, message_id: int) -> bool:
        """Delete a message, or wait for the deletion already begun; whether it is gone."""
        known = self._known.get((chat_id, message_id))
        if known is not None:
            await known.done.wait()
            return known.ok
        deletion = self._known[(chat_id, message_id)] = _Deletion()
        await self._run(chat_id, message_id, deletion)
        return deletion.ok

    async def _run(self, chat_id: int, message_id: int, deletion: _Deletion) -> None:
        try:
            deletion.ok = await self._outbox.delete(chat_id, message_id)
        finally:
            deletion.done.set()

    def forget(self, chat_id: int, message_id: int) -> None:
        self._known.pop((chat_id, message_id), None)
