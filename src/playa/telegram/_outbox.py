"""The Bot API calls made for chats (replies, deletions, buttons, typing): where no reply is dropped.

A reply is sealed into the outbox journal before its first attempt and removed once its last
part is delivered. Flood control (429), server errors (5xx) and network failures are retried
with backoff until the reply's deadline (an hour by default); a restart resumes what is left.
Replies to one chat go out one at a time, in order, the resumed ones first.

Every method here either succeeds or reports failure in its return value (``None``,
``False``): the chats' code never sees a ``telegram.error`` exception. Start-up, polling and
the webhook's registration (``_bot.py``, ``_webhook.py``) handle their own.
"""

from __future__ import annotations

import itertools
import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypedDict, TypeVar, Unpack

import anyio
from anyio.abc import TaskGroup, TaskStatus
from telegram import (
    Bot,
    BotCommand,
    ChatMember,
    ForceReply,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    MessageEntity,
    ReplyParameters,
)
from telegram.constants import ChatAction
from telegram.error import BadRequest, ChatMigrated, NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from ..core import KeyedLocks, check_at_least
from ..exceptions import ConfigError
from ._bounds import check_seconds
from ._journal import Journal
from ._split import Part

__all__ = ["Delivery", "Outbox", "RetryPolicy", "entities_of", "retry_seconds"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How failed Bot API calls are retried."""

    deadline: float = 3600.0
    """How long a reply is retried (flood control, 5xx, network) before it is given up."""
    backoff: float = 1.0
    """The first wait after a 5xx or network failure; it doubles up to ``backoff_max``."""
    backoff_max: float = 60.0
    attempts: int = 4
    """Tries of a call that is not a reply (delete, admins…), the first included."""
    max_wait: float = 120.0
    """For calls that are not replies: a longer flood-control wait than this gives the call up."""

    def __post_init__(self) -> None:
        for name in ("deadline", "max_wait"):
            check_seconds(self, name, positive=False)
        for name in ("backoff", "backoff_max"):
            check_seconds(self, name, positive=True)
        if self.backoff > self.backoff_max:
            raise ConfigError(
                f"RetryPolicy.backoff ({self.backoff}) must not exceed RetryPolicy.backoff_max ({self.backoff_max})"
            )
        check_at_least(self, attempts=1)


def retry_seconds(exc: RetryAfter) -> float:
    """The wait Telegram asked for, in seconds, whichever type this PTB version reports."""
    with warnings.catch_warnings():
        # PTB 22 warns that the int form is deprecated; both forms are handled here.
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


@dataclass(eq=False, kw_only=True)
class Delivery:
    """One reply on its way: its parts, how many are delivered, and until when it is retried."""

    name: str
    chat_id: int
    parts: list[Part]
    thread_id: int | None = None
    reply_to: int | None = None
    sent: int = 0
    created: float = 0.0
    durable: bool = True
    markup: InlineKeyboardMarkup | ForceReply | None = field(default=None, repr=False)
    """Buttons (or a forced reply) on the last part; only messages that are not kept across restarts have them."""
    last_id: int | None = None
    answers: str | None = None
    """The inbox record of the message this replies to: a takeover that finds the message's turn
    cut short but this reply written knows the message is answered."""

    def record(self) -> dict[str, Any]:
        return {
            "chat_id": self.chat_id,
            "thread_id": self.thread_id,
            "reply_to": self.reply_to,
            "sent": self.sent,
            "created": self.created,
            "parts": [{"text": p.text, "entities": p.entities} for p in self.parts],
            "answers": self.answers,
        }

    @classmethod
    def from_record(cls, name: str, record: dict[str, Any]) -> Delivery:
        return cls(
            name=name,
            chat_id=int(record["chat_id"]),
            thread_id=record.get("thread_id"),
            reply_to=record.get("reply_to"),
            sent=int(record.get("sent", 0)),
            created=float(record.get("created", 0.0)),
            parts=[Part(str(p["text"]), list(p.get("entities") or [])) for p in record["parts"]],
            answers=record.get("answers"),
        )


def entities_of(part: Part) -> list[MessageEntity] | None:
    if not part.entities:
        return None
    return [
        MessageEntity(
            type=str(e["type"]),
            offset=int(str(e["offset"])),
            length=int(str(e["length"])),
            url=str(e["url"]) if "url" in e else None,
            language=str(e["language"]) if "language" in e else None,
        )
        for e in part.entities
    ]


class Placement(TypedDict, total=False):
    """Where and how a reply goes in its chat (``Outbox.post``'s keywords)."""

    thread_id: int | None
    reply_to: int | None
    markup: InlineKeyboardMarkup | ForceReply | None
    durable: bool


class Outbox:
    """What the front end asks of the Bot API: send, delete, show typing, read admins."""

    def __init__(
        self,
        bot: Bot,
        *,
        retry: RetryPolicy | None = None,
        journal: Journal | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.bot = bot
        self.retry = retry or RetryPolicy()
        self._journal = journal
        self._clock = clock
        self._locks: KeyedLocks[int] = KeyedLocks()
        """Each chat's order: one reply at a time, the resumed ones first."""
        self._names = itertools.count()
        self.depth = 0
        """Replies waiting for their delivery or being delivered (``/metrics``)."""

    # Replies

    async def post(
        self,
        chat_id: int,
        parts: Sequence[Part],
        *,
        thread_id: int | None = None,
        reply_to: int | None = None,
        markup: InlineKeyboardMarkup | ForceReply | None = None,
        durable: bool = True,
        answers: str | None = None,
    ) -> Delivery:
        """Queue a reply; a durable one is in the journal when this returns."""
        delivery = Delivery(
            name=f"{time.time_ns():020d}-{next(self._names):06d}",
            chat_id=chat_id,
            parts=list(parts),
            thread_id=thread_id,
            reply_to=reply_to,
            created=self._clock(),
            durable=durable and self._journal is not None and markup is None,
            markup=markup,
            answers=answers,
        )
        if delivery.durable:
            await self._save(delivery)
        return delivery

    async def deliver(self, delivery: Delivery) -> int | None:
        """Deliver a posted reply in its chat's order; the id of its last part, ``None`` if given up.

        Cancelled while it waits (the bot stopping), a durable reply stays in the journal.
        """
        self.depth += 1
        try:
            async with self._locks.of(delivery.chat_id):
                return await self._deliver(delivery)
        finally:
            self.depth -= 1

    async def send(self, chat_id: int, parts: Sequence[Part], **placed: Unpack[Placement]) -> int | None:
        """``post`` and ``deliver`` in one."""
        return await self.deliver(await self.post(chat_id, parts, **placed))

    async def discard(self, delivery: Delivery) -> None:
        """Forget a posted reply that is not to be delivered after all."""
        await self._forget(delivery)

    async def resume(self, tg: TaskGroup, chat_id: int | None = None) -> list[Delivery]:
        """Deliver, in ``tg``, the replies a previous run (or a process now dead) left for
        ``chat_id`` (None: every chat); returns them.

        Each chat's resumed replies hold its order lock before this returns, so they go out
        before anything sent later.
        """
        journal = self._journal
        if journal is None:
            return []
        by_chat: dict[int, list[Delivery]] = {}
        for name, record in await journal.load(chat_id):
            try:
                delivery = Delivery.from_record(name, record)
            except (KeyError, TypeError, ValueError):
                logger.warning("outbox record %s is malformed; dropped", name)
                await journal.delete(name)
                continue
            by_chat.setdefault(delivery.chat_id, []).append(delivery)
        for chat, deliveries in by_chat.items():
            await tg.start(self._resume_chat, chat, deliveries)
        return [delivery for deliveries in by_chat.values() for delivery in deliveries]

    async def _resume_chat(
        self, chat_id: int, deliveries: list[Delivery], *, task_status: TaskStatus[None]
    ) -> None:
        self.depth += len(deliveries)
        left = len(deliveries)
        try:
            async with self._locks.of(chat_id):
                task_status.started()
                for delivery in deliveries:
                    await self._deliver(delivery)
                    left -= 1
                    self.depth -= 1
        finally:
            self.depth -= left

    async def _save(self, delivery: Delivery) -> None:
        assert self._journal is not None
        await self._journal.put(delivery.name, delivery.chat_id, delivery.record())

    async def _forget(self, delivery: Delivery) -> None:
        if delivery.durable and self._journal is not None:
            await self._journal.delete(delivery.name)

    async def _deliver(self, delivery: Delivery) -> int | None:
        while delivery.sent < len(delivery.parts):
            index = delivery.sent
            message_id = await self._send_part(delivery, index)
            if message_id is None:
                await self._forget(delivery)
                return None
            delivery.last_id = message_id
        return delivery.last_id

    async def _send_part(self, delivery: Delivery, index: int) -> int | None:
        """Send one part until it is delivered or its deadline passes; its message id, or ``None``."""
        part = delivery.parts[index]
        last = index == len(delivery.parts) - 1
        entities = entities_of(part)
        failures = 0
        while True:
            reply = (
                ReplyParameters(message_id=delivery.reply_to, allow_sending_without_reply=True)
                if delivery.reply_to is not None and index == 0
                else None
            )
            try:
                # Shielded with its journal update, so a stop between the two cannot send it twice.
                with anyio.CancelScope(shield=True):
                    message = await self.bot.send_message(
                        delivery.chat_id,
                        part.text,
                        entities=entities,
                        message_thread_id=delivery.thread_id,
                        reply_parameters=reply,
                        reply_markup=delivery.markup if last else None,
                        # A preview would make Telegram fetch any URL in a reply, a private MCP URL included.
                        link_preview_options=LinkPreviewOptions(is_disabled=True),
                    )
                    delivery.sent = index + 1
                    if last:
                        await self._forget(delivery)
                    elif delivery.durable:
                        await self._save(delivery)
                return message.message_id
            except RetryAfter as exc:
                wait = retry_seconds(exc)
                logger.info("sendMessage: flood control, retrying in %.0f s", wait)
            except ChatMigrated as exc:
                logger.info("chat %s became %s; sending there", delivery.chat_id, exc.new_chat_id)
                delivery.chat_id = exc.new_chat_id
                continue
            except BadRequest as exc:
                if entities is not None:
                    # The formatting was refused: the same text, plain, says the same.
                    logger.info(
                        "formatting refused in chat %s (%s); sending plain text", delivery.chat_id, exc
                    )
                    entities = None
                    continue
                logger.warning("sending to chat %s failed: %s", delivery.chat_id, exc)
                return None
            except NetworkError as exc:  # 5xx, timeouts, connection failures
                failures += 1
                wait = min(self.retry.backoff_max, self.retry.backoff * 2 ** (failures - 1))
                logger.info(
                    "sendMessage to chat %s failed (%s); retrying in %.0f s", delivery.chat_id, exc, wait
                )
            except TelegramError as exc:  # Forbidden (blocked, removed), and the rest: no retry helps
                logger.warning("sending to chat %s failed: %s: %s", delivery.chat_id, type(exc).__name__, exc)
                return None
            if self._clock() + wait > delivery.created + self.retry.deadline:
                logger.error(
                    "a reply to chat %s is given up: not delivered within %.0f s",
                    delivery.chat_id,
                    self.retry.deadline,
                )
                return None
            await anyio.sleep(wait)

    # Other calls: bounded retries, nothing kept

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

    async def delete(self, chat_id: int, message_id: int) -> bool:
        """Delete a message; ``False`` when Telegram refuses (no admin right, older than 48 h, …)."""
        try:
            return await self._call("deleteMessage", lambda: self.bot.delete_message(chat_id, message_id))
        except BadRequest as exc:
            if "not found" in str(exc).lower():
                return True  # already gone, deleted before a restart, say
            logger.info("deleting message %s in chat %s failed: %s", message_id, chat_id, exc)
            return False
        except TelegramError as exc:
            logger.info("deleting message %s in chat %s failed: %s", message_id, chat_id, exc)
            return False

    async def answer_button(self, query_id: str, text: str | None = None) -> None:
        """Acknowledge a button press (``answerCallbackQuery``); failures do not matter."""
        try:
            await self.bot.answer_callback_query(query_id, text=text)
        except TelegramError as exc:
            logger.debug("answering a button press failed: %s", exc)

    async def drop_buttons(self, chat_id: int, message_id: int) -> None:
        """Remove the buttons of a message once they can no longer be used."""
        try:
            await self.bot.edit_message_reply_markup(chat_id, message_id, reply_markup=None)
        except TelegramError as exc:
            logger.debug("removing the buttons of message %s failed: %s", message_id, exc)

    async def edit(
        self, chat_id: int, message_id: int, part: Part, *, markup: InlineKeyboardMarkup | None = None
    ) -> bool:
        """Replace a message's text and buttons (none: they go); ``False`` when Telegram refuses."""
        try:
            await self._call(
                "editMessageText",
                lambda: self.bot.edit_message_text(
                    part.text,
                    chat_id=chat_id,
                    message_id=message_id,
                    entities=entities_of(part),
                    reply_markup=markup,
                    link_preview_options=LinkPreviewOptions(is_disabled=True),
                ),
            )
        except BadRequest as exc:
            if "not modified" in str(exc).lower():
                return True  # a second press of the same choice
            logger.info("editing message %s in chat %s failed: %s", message_id, chat_id, exc)
            return False
        except TelegramError as exc:
            logger.info("editing message %s in chat %s failed: %s", message_id, chat_id, exc)
            return False
        return True

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

    async def set_description(self, description: str, short_description: str) -> bool:
        """Set what a user sees before the first message, and on the bot's profile."""
        try:
            await self._call("setMyDescription", lambda: self.bot.set_my_description(description))
            await self._call(
                "setMyShortDescription", lambda: self.bot.set_my_short_description(short_description)
            )
        except TelegramError as exc:
            logger.warning("setting the bot's description failed: %s", exc)
            return False
        return True
