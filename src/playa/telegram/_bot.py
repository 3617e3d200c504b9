"""The Telegram front end: updates in, one queue and one session per chat, replies out."""

from __future__ import annotations

import logging
import re
import traceback
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Final

import anyio
from anyio.abc import TaskGroup
from telegram import Bot, Message, Update
from telegram.error import Conflict, Forbidden, InvalidToken, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

from ..exceptions import ConfigError
from ..host import ChatSession, Host, IncomingMessage, parse_command
from ._answers import Answer, PendingAnswers
from ._logs import token_filtered_logs
from ._outbox import Outbox, RetryPolicy, retry_seconds
from ._owner import OWNER_TTL, Owners
from ._ui import Deletions, TelegramUI
from ._webhook import WebhookConfig, serve_webhook

__all__ = ["ALLOWED_UPDATES", "TelegramBot", "TelegramSettings", "build_bot", "run_telegram"]

logger = logging.getLogger(__name__)

ALLOWED_UPDATES: Final = ("message",)
"""Only new messages: edits never run commands, and channel posts are not for the bot."""
_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
_SORRY: Final = "Sorry, something went wrong with that message. It was logged; please try again."
_WELCOME: Final = "Hello! I am this chat's agent. Write to me, or use a command.\n\n"
_BACKOFF_MAX: Final = 30.0
_SHUTDOWN_TIMEOUT: Final = 5.0


@dataclass(frozen=True, kw_only=True)
class TelegramSettings:
    """How the bot polls, waits and retries; the defaults suit the public Bot API."""

    poll_timeout: float = 30.0
    """How long one ``getUpdates`` long poll may be held by Telegram."""
    owner_ttl: float = OWNER_TTL
    """How long a group's creator is remembered before it is asked again."""
    typing_interval: float = 4.0
    """Telegram shows "typing…" for 5 s, so it is repeated a little sooner while a turn runs."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_queued: int = 50
    """Messages that may wait in one chat's queue; more are dropped (and logged)."""

    def __post_init__(self) -> None:
        if self.poll_timeout < 0 or self.owner_ttl < 0 or self.typing_interval <= 0 or self.max_queued < 1:
            raise ValueError("TelegramSettings: timeouts must be >= 0, typing_interval > 0, max_queued >= 1")


def _text(message: Message) -> str | None:
    # A caption is read like text: a photo captioned `/mcp_add … --bearer KEY` is a command too.
    return message.text if message.text is not None else message.caption


class TelegramBot:
    """Runs a host's chats on Telegram: ``await TelegramBot(host, bot).run()``.

    Each chat has a queue worked by one task at a time, so one chat's turns run in order while
    other chats go on. Secret answers bypass the queues: the command that waits for one holds
    its chat's queue.
    """

    def __init__(self, host: Host, bot: Bot, *, settings: TelegramSettings | None = None) -> None:
        self.host = host
        self.bot = bot
        self.settings = settings or TelegramSettings()
        self.outbox = Outbox(bot, retry=self.settings.retry)
        self.owners = Owners(self.outbox, ttl=self.settings.owner_ttl)
        self.answers = PendingAnswers()
        self.deletions = Deletions(self.outbox)
        self._queues: dict[int, deque[Message]] = {}
        self._tg: TaskGroup | None = None
        self._username = ""
        self._offset: int | None = None
        """The next update id to ask for; everything before it has been taken."""

    # Running

    async def run(
        self, *, webhook: WebhookConfig | None = None, listening: Callable[[int], None] | None = None
    ) -> None:
        """Serve until cancelled: long polling, or the webhook when one is configured."""
        with token_filtered_logs(self.bot.token):
            try:
                await self._start()
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    try:
                        if webhook is None:
                            await self._poll()
                        else:
                            await serve_webhook(
                                self.bot,
                                webhook,
                                self.dispatch,
                                allowed_updates=ALLOWED_UPDATES,
                                listening=listening,
                            )
                    finally:
                        # The chats' workers end with the loop that feeds them.
                        tg.cancel_scope.cancel()
            finally:
                self._tg = None
                with anyio.move_on_after(_SHUTDOWN_TIMEOUT, shield=True):
                    await self._stop()

    async def _start(self) -> None:
        try:
            await self.bot.initialize()  # getMe: checks the token
        except InvalidToken:
            raise ConfigError("Telegram refused the bot token (TELEGRAM_BOT_TOKEN)") from None
        except TelegramError as exc:
            raise ConfigError(f"cannot reach the Telegram Bot API: {exc}") from None
        self._username = (self.bot.username or "").lower()
        commands = [
            (command.name, command.summary[:256] or command.name)
            for command in self.host.commands.all()
            if _COMMAND_NAME.fullmatch(command.name)
        ]
        await self.outbox.set_commands(commands)
        logger.info("Telegram bot @%s started", self._username)

    async def _stop(self) -> None:
        try:
            if self._offset is not None:
                # Confirms the updates already taken, so a restart does not run them again.
                await self.bot.get_updates(offset=self._offset, timeout=0, limit=1)
        except TelegramError as exc:
            logger.info("confirming the last updates failed: %s", exc)
        finally:
            await self.bot.shutdown()

    async def _poll(self) -> None:
        try:
            await self.bot.delete_webhook()
        except TelegramError as exc:
            logger.warning("removing the webhook failed: %s", exc)
        failures = 0
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=self._offset,
                    timeout=int(self.settings.poll_timeout),
                    allowed_updates=list(ALLOWED_UPDATES),
                )
            except (InvalidToken, Forbidden):
                raise ConfigError("Telegram refused the bot token (TELEGRAM_BOT_TOKEN)") from None
            except RetryAfter as exc:
                await anyio.sleep(retry_seconds(exc))
                continue
            except TelegramError as exc:
                failures += 1
                wait = min(_BACKOFF_MAX, 2.0 ** min(failures, 5))
                if isinstance(exc, Conflict):
                    logger.error(
                        "another instance of this bot is polling (%s); retrying in %.0f s", exc, wait
                    )
                else:
                    logger.warning("getUpdates failed: %s; retrying in %.0f s", exc, wait)
                await anyio.sleep(wait)
                continue
            failures = 0
            for update in updates:
                self._offset = update.update_id + 1
                self.dispatch(update)

    # Updates

    def dispatch(self, update: Update) -> None:
        """Route one update without waiting: an awaited answer, or a message for its chat's queue."""
        message = update.message  # edits, channel posts and the rest are ignored
        if message is None or message.chat.type == message.chat.CHANNEL:
            return
        text = _text(message)
        if text is None:
            return
        chat_id = message.chat.id
        user = message.from_user
        if (
            user is not None
            and message.sender_chat is None
            and self.answers.offer(chat_id, user.id, Answer(text, message.message_id))
        ):
            return
        if self._for_another_bot(text):
            return
        tg = self._tg
        if tg is None:
            return
        parsed = parse_command(text)
        if parsed is not None:
            command = self.host.commands.get(parsed.name)
            # The host's own rule (it deletes the same messages); applied here too so that the
            # key disappears at once, not when the chat's queue reaches the message.
            secret = command.carries_secret(parsed.args) if command else parsed.name.startswith("mcp")
            if secret:
                self.deletions.start(tg, chat_id, message.message_id)
            if parsed.name == "stop":
                # /stop is for the turn at the head of the chat's queue: it cannot wait behind it.
                tg.start_soon(self._handle, message)
                return
        queue = self._queues.get(chat_id)
        if queue is None:
            queue = self._queues[chat_id] = deque([message])
            tg.start_soon(self._work, chat_id, queue)
        elif len(queue) < self.settings.max_queued:
            queue.append(message)
        else:
            self.deletions.forget(chat_id, message.message_id)  # its deletion, if any, still runs
            logger.warning("chat %s has %d messages waiting; one was dropped", chat_id, len(queue))

    def _for_another_bot(self, text: str) -> bool:
        head = text.lstrip().split(maxsplit=1)[0] if text.strip() else ""
        if not head.startswith("/") or "@" not in head:
            return False
        return head.partition("@")[2].lower() != self._username

    async def _work(self, chat_id: int, queue: deque[Message]) -> None:
        try:
            while queue:
                message = queue[0]
                try:
                    await self._handle(message)
                finally:
                    queue.popleft()
                    self.deletions.forget(chat_id, message.message_id)
        finally:
            if self._queues.get(chat_id) is queue:
                del self._queues[chat_id]

    async def _handle(self, message: Message) -> None:
        chat = message.chat
        session: ChatSession | None = None
        ui: TelegramUI | None = None
        try:
            info = await self.owners.identify(message)
            session = await self.host.session(f"telegram:{chat.id}", owner=info.owner)
            ui = TelegramUI(
                self.outbox,
                self.deletions,
                self.answers,
                chat_id=chat.id,
                thread_id=message.message_thread_id if message.is_topic_message else None,
                user_id=info.user_id,
                message_id=message.message_id,
                redact=partial(self.host.redact, session),
                quote=chat.type != chat.PRIVATE,
            )
            text = _text(message) or ""
            incoming = IncomingMessage(text=text, sender=info.sender, ref=message.message_id)
            parsed = parse_command(text)
            if parsed is not None and parsed.name == "start" and self.host.commands.get("start") is None:
                # Telegram sends /start when a user opens a chat with the bot.
                await ui.send(_WELCOME + self.host.commands.help_text(for_owner=info.sender.is_owner))
                return
            async with self._typing(ui, chat.id) if parsed is None else nullcontext():
                reply = await self.host.handle(session, incoming, ui)
            if reply is not None:
                await ui.send(reply.text)
        except Exception as exc:  # boundary: one message's failure is answered; the bot goes on
            detail = "".join(traceback.format_exception(exc))
            redacted = (
                self.host.redact(session, detail) if session else self.host.config.env.scrub_text(detail)
            )
            logger.error("handling a message in chat %s failed:\n%s", chat.id, redacted)
            if ui is not None:
                await ui.send(_SORRY)
            else:
                await self.outbox.send(chat.id, _SORRY)

    @asynccontextmanager
    async def _typing(self, ui: TelegramUI, chat_id: int) -> AsyncIterator[None]:
        """Show "typing…" in the chat while the block runs."""

        async def keep_typing() -> None:
            while True:
                await self.outbox.typing(chat_id, ui.thread_id)
                await anyio.sleep(self.settings.typing_interval)

        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_typing)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()


def build_bot(token: str, *, base_url: str | None = None, poll_timeout: float = 30.0) -> Bot:
    """A PTB ``Bot`` for ``token``; ``base_url`` points it at a local Bot API server (or a fake one).

    ``base_url`` is the API root, like ``http://127.0.0.1:8081``; the ``/bot<token>`` and
    ``/file/bot<token>`` paths are added here.
    """
    if not token:
        raise ConfigError("set TELEGRAM_BOT_TOKEN to the token @BotFather gave you")
    root = (base_url or "https://api.telegram.org").rstrip("/")
    return Bot(
        token,
        base_url=f"{root}/bot",
        base_file_url=f"{root}/file/bot",
        # Chats run concurrently and each may be sending or deleting: PTB's default pool of one
        # connection would queue them all behind each other.
        request=HTTPXRequest(connection_pool_size=64, read_timeout=30.0, pool_timeout=10.0),
        get_updates_request=HTTPXRequest(connection_pool_size=1, read_timeout=poll_timeout + 10.0),
    )


async def run_telegram(
    host: Host,
    *,
    token: str,
    base_url: str | None = None,
    webhook: WebhookConfig | None = None,
    settings: TelegramSettings | None = None,
    listening: Callable[[int], None] | None = None,
) -> None:
    """Run ``host``'s chats as a Telegram bot until cancelled (long polling, or ``webhook``)."""
    settings = settings or TelegramSettings()
    bot = build_bot(token, base_url=base_url, poll_timeout=settings.poll_timeout)
    await TelegramBot(host, bot, settings=settings).run(webhook=webhook, listening=listening)
