"""Calls to the Bot API, with flood control respected: the one seam where Telegram errors stop.

Every method here either succeeds or reports failure in its return value (``None``, ``False``);
no ``telegram.error`` exception travels further into the front end.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import anyio
from telegram import (
    Bot,
    BotCommand,
    ChatMember,
    ForceReply,
    LinkPreviewOptions,
    ReplyParameters,
)
from telegram.constants import ChatAction
from telegram.error import RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from ._split import split_message

__all__ = ["Outbox", "RetryPolicy", "retry_seconds"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How flood control (HTTP 429, ``RetryAfter``) is obeyed."""

    attempts: int = 4
    """Tries per call, the first included."""
    max_wait: float = 120.0
    """A longer wait than this is not waited for: the call is given up."""

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.max_wait < 0:
            raise ValueError("RetryPolicy needs attempts >= 1 and max_wait >= 0")


def retry_seconds(exc: RetryAfter) -> float:
    """The wait Telegram asked for, in seconds, whichever type this PTB version reports."""
    with warnings.catch_warnings():
        # PTB 22 warns that the int form is deprecated; both forms are handled here.
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class Outbox:
    """What the front end asks of the Bot API: send, delete, show typing, read admins."""

    def __init__(self, bot: Bot, *, retry: RetryPolicy | None = None) -> None:
        self.bot = bot
        self.retry = retry or RetryPolicy()

    async def _call(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run one API call, waiting out flood control; other Telegram errors propagate."""
        for attempt in range(1, self.retry.attempts + 1):
            try:
                return await call()
            except RetryAfter as exc:
                wait = retry_seconds(exc)
                if attempt == self.retry.attempts or wait > self.retry.max_wait:
                    raise
                logger.info("%s: flood control, retrying in %.0f s", what, wait)
                await anyio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int | None = None,
        reply_to: int | None = None,
        force_reply: bool = False,
    ) -> int | None:
        """Send plain text, split to fit; the id of the last part sent, or ``None`` if any part failed.

        The first part answers ``reply_to``; the last carries the force-reply markup.
        """
        parts = split_message(text)
        sent: int | None = None
        for index, part in enumerate(parts):
            reply = (
                ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
                if reply_to is not None and index == 0
                else None
            )
            markup = ForceReply(selective=True) if force_reply and index == len(parts) - 1 else None

            async def call(
                part: str = part, reply: ReplyParameters | None = reply, markup: ForceReply | None = markup
            ) -> int:
                message = await self.bot.send_message(
                    chat_id,
                    part,
                    message_thread_id=thread_id,
                    reply_parameters=reply,
                    reply_markup=markup,
                    # A preview would make Telegram fetch any URL in a reply, a private MCP URL included.
                    link_preview_options=LinkPreviewOptions(is_disabled=True),
                )
                return message.message_id

            try:
                sent = await self._call("sendMessage", call)
            except TelegramError as exc:
                logger.warning("sending to chat %s failed: %s: %s", chat_id, type(exc).__name__, exc)
                return None
        return sent

    async def delete(self, chat_id: int, message_id: int) -> bool:
        """Delete a message; ``False`` when Telegram refuses (no admin right, older than 48 h, …)."""
        try:
            return await self._call("deleteMessage", lambda: self.bot.delete_message(chat_id, message_id))
        except TelegramError as exc:
            logger.info("deleting message %s in chat %s failed: %s", message_id, chat_id, exc)
            return False

    async def typing(self, chat_id: int, thread_id: int | None = None) -> None:
        """Show "typing…" for about five seconds; failures do not matter."""
        try:
            await self.bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=thread_id)
        except TelegramError as exc:
            logger.debug("typing in chat %s failed: %s", chat_id, exc)

    async def administrators(self, chat_id: int) -> Sequence[ChatMember] | None:
        """A group's administrators, its creator among them; ``None`` when Telegram will not say."""
        try:
            return await self._call(
                "getChatAdministrators", lambda: self.bot.get_chat_administrators(chat_id)
            )
        except TelegramError as exc:
            logger.warning("reading the administrators of chat %s failed: %s", chat_id, exc)
            return None

    async def set_commands(self, commands: Sequence[tuple[str, str]]) -> bool:
        """Publish the command menu; ``False`` when Telegram refuses it."""
        menu = [BotCommand(name, summary) for name, summary in commands]
        try:
            return await self._call("setMyCommands", lambda: self.bot.set_my_commands(menu))
        except TelegramError as exc:
            logger.warning("publishing the command menu failed: %s", exc)
            return False
