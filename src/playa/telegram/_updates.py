"""What an update says (its text, its topic, a group's move), a message waiting in a chat's queue,
and a short note about a message."""

from __future__ import annotations

from dataclasses import dataclass

from telegram import Message

from ..core import Inbound
from ._outbox import Delivery, Outbox
from ._render import plain

__all__ = ["Queued", "migration_of", "note", "posted_note", "text_of", "thread_of"]


def text_of(message: Message) -> str | None:
    # A caption is read like text: a photo captioned `/mcp_add … --bearer KEY` is a command too.
    return message.text if message.text is not None else message.caption


def thread_of(message: Message) -> int | None:
    """The forum topic a message belongs to, which everything about it goes to."""
    return message.message_thread_id if message.is_topic_message else None


def migration_of(message: Message) -> tuple[int, int] | None:
    """``(old id, new id)`` when ``message`` says a group became a supergroup, with a new chat id.

    Telegram says it twice: ``migrate_to_chat_id`` in the old group, ``migrate_from_chat_id``
    as the first message of the new supergroup.
    """
    if message.migrate_to_chat_id is not None:
        return message.chat.id, message.migrate_to_chat_id
    if message.migrate_from_chat_id is not None:
        return message.migrate_from_chat_id, message.chat.id
    return None


@dataclass(eq=False)
class Queued:
    """A message in its chat's queue, with what the classifier found in it."""

    message: Message
    name: str
    """Its inbox record: kept until it is handled, so a restart handles it."""
    inbound: Inbound
    move: tuple[int, int] | None = None
    """For a group upgrade: the old and the new chat id."""


async def posted_note(outbox: Outbox, message: Message, text: str) -> Delivery:
    """A short note of the bot's own about ``message``, in its chat and topic (in reply, in a
    group), posted: in the journal, to be delivered."""
    return await outbox.post(
        message.chat.id,
        plain(text),
        thread_id=thread_of(message),
        reply_to=message.message_id if message.chat.type != message.chat.PRIVATE else None,
    )


async def note(outbox: Outbox, message: Message, text: str) -> None:
    """``posted_note``, delivered."""
    await outbox.deliver(await posted_note(outbox, message, text))
