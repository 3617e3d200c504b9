"""Who owns a Telegram chat, and who sent a message.

In a private chat the owner is the user. In a group or supergroup it is the chat's creator,
as ``getChatAdministrators`` reports (status ``creator``), cached for a while. A message sent
on behalf of a chat (an anonymous admin, a linked channel) names no person, so it is never
the owner's: anyone among the admins could have sent it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from telegram import Message

from ..core import Sender
from ._outbox import Outbox

__all__ = ["ANONYMOUS_ADMIN_ID", "OWNER_TTL", "CommandChat", "Owners", "SenderInfo", "owner_name"]

ANONYMOUS_ADMIN_ID: Final = 1087968824
"""``@GroupAnonymousBot``: the ``from`` of messages that anonymous group admins send."""
SERVICE_USER_ID: Final = 777000
"""Telegram itself: the ``from`` of posts a linked channel forwards into its discussion group."""
OWNER_TTL: Final = 600.0
_FAILED_TTL: Final = 30.0
"""A failed lookup is retried after this long, not at once: the chat must not flood the API."""


def owner_name(owner_id: int | None) -> str:
    """The chat's owner as the host names it (``ChatSession.owner``): the Telegram user id, or
    ``unknown`` when it cannot be known."""
    return str(owner_id) if owner_id is not None else "unknown"


@dataclass(frozen=True, slots=True)
class SenderInfo:
    """The host's view of a sender, the user id to address questions to, and the chat's owner."""

    sender: Sender
    user_id: int | None
    owner_id: int | None = None
    """The owner's Telegram user id, who alone may approve (``None`` when it cannot be known)."""

    @property
    def owner(self) -> str:
        return owner_name(self.owner_id)


@dataclass(frozen=True, slots=True)
class CommandChat:
    """Where the command of a button meant for the owner runs, as the owner: the chat the servers
    belong to (and its topic)."""

    chat_id: int
    thread_id: int | None
    group: bool
    owner_id: int
    """Who alone may press: the chat's owner when the buttons were shown."""

    def moved(self, new_id: int) -> CommandChat:
        """The same chat after a group's upgrade to the supergroup ``new_id`` (which has no topic yet)."""
        return replace(self, chat_id=new_id, thread_id=None)


class Owners:
    """Finds the owner of each chat; group creators are cached for ``ttl`` seconds."""

    def __init__(
        self, outbox: Outbox, *, ttl: float = OWNER_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._outbox = outbox
        self._ttl = ttl
        self._clock = clock
        self._creators: dict[int, tuple[int | None, float]] = {}

    async def creator(self, chat_id: int) -> int | None:
        """The user id of a group's creator, or ``None`` when it cannot be known."""
        cached = self._creators.get(chat_id)
        now = self._clock()
        if cached is not None and cached[1] > now:
            return cached[0]
        admins = await self._outbox.administrators(chat_id)
        if admins is None:
            self._creators[chat_id] = (None, now + _FAILED_TTL)
            return None
        creator = next((member.user.id for member in admins if member.status == "creator"), None)
        self._creators[chat_id] = (creator, now + self._ttl)
        return creator

    async def owner_of(self, chat_id: int, *, private: bool) -> int | None:
        """The user id of the chat's owner: a private chat's one user, a group's creator."""
        return chat_id if private else await self.creator(chat_id)

    async def identify(self, message: Message) -> SenderInfo:
        """Who sent ``message``, and whether that is the chat's owner."""
        chat = message.chat
        user = message.from_user
        anonymous = (
            message.sender_chat is not None
            or user is None
            or user.id in (ANONYMOUS_ADMIN_ID, SERVICE_USER_ID)
            or user.is_bot
        )
        owner_id = await self.owner_of(chat.id, private=chat.type == chat.PRIVATE)
        if anonymous or user is None:
            on_behalf = message.sender_chat
            sender_id = f"chat:{on_behalf.id}" if on_behalf is not None else "unknown"
            name = (on_behalf.title or on_behalf.username or "") if on_behalf is not None else ""
            return SenderInfo(Sender(sender_id, name or "anonymous", is_owner=False), None, owner_id)
        is_owner = owner_id is not None and user.id == owner_id
        return SenderInfo(Sender(str(user.id), user.full_name, is_owner=is_owner), user.id, owner_id)
