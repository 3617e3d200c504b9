"""What an earlier run, or a process now dead, left in the inbox: each record taken back once."""

from __future__ import annotations

from typing import Any

from telegram import Update

from ._journal import Journal
from ._notices import INTERRUPTED
from ._outbox import Outbox
from ._render import plain

__all__ = ["left_behind"]


async def left_behind(
    inbox: Journal, outbox: Outbox, name: str, record: dict[str, Any], *, answered: set[str]
) -> Update | None:
    """The update of the inbox record ``name`` to route again; None when the record is dealt with
    here: a turn begun and never ended is reported (unless ``answered``: its reply was written),
    a record without an update is dropped."""
    if record.get("started"):
        if name not in answered:
            # Written as the record's answer, and the record deleted, before it is sent: a
            # process that takes over after a crash resumes this notice and sends no second one.
            notice = await outbox.post(
                int(record["chat_id"]),
                plain(INTERRUPTED),
                thread_id=record.get("thread_id"),
                reply_to=record.get("message_id"),
                answers=name,
            )
            await inbox.delete(name)
            await outbox.deliver(notice)
        else:
            await inbox.delete(name)
        return None
    raw = record.get("update")
    update = Update.de_json(raw, outbox.bot) if isinstance(raw, dict) else None
    if update is None:
        await inbox.delete(name)
    return update
