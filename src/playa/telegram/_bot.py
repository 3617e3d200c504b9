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

from ..agent import Host
from ..core import (
    NOTHING_TO_CANCEL,
    ChatSession,
    Inbound,
    IncomingMessage,
    Sender,
    beside_a_question,
    cancelled_for,
    classify,
    install_outbound_gate,
    outbound_secrets,
)
from ..exceptions import ConfigError
from ._answers import Answer, PendingAnswers
from ._approvals import Approvals, Decision
from ._buttons import Buttons
from ._journal import Journal
from ._logs import quiet_raw_traffic
from ._outbox import Outbox, RetryPolicy, check_seconds, retry_seconds
from ._owner import OWNER_TTL, Owners
from ._ui import Deletions, TelegramUI, one_part, render
from ._webhook import RedirectRoute, WebhookConfig, serve_redirect, serve_webhook

__all__ = ["ALLOWED_UPDATES", "TelegramBot", "TelegramSettings", "build_bot", "run_telegram"]

logger = logging.getLogger(__name__)

ALLOWED_UPDATES: Final = ("message", "edited_message", "callback_query")
"""New messages; edits, so that a key edited into a message is deleted; button presses."""
_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
_SORRY: Final = "Sorry, something went wrong with that message. It was logged; please try again."
DESCRIPTION: Final = (
    "I am a chat agent. Each chat with me has its own agent and workspace, and the chat's owner "
    "can connect their own remote MCP servers to it; their keys never reach the model.\n\n"
    "Add a server with /mcp_add <name> <url> --bearer (I ask for the token and delete your "
    "answer), list them with /mcp_list, and see every command with /help."
)
SHORT_DESCRIPTION: Final = "A chat agent whose owner connects their own remote MCP servers."
_WELCOME: Final = (
    "Hello! I am this chat's agent: write to me, and I answer with the tools this chat has.\n\n"
    "You own this chat, so you can connect your own remote MCP servers to it:\n"
    "/mcp_add <name> <url> --bearer\n"
    "I then ask for the token, delete your answer, and keep the token out of the conversation.\n\n"
)
_WELCOME_GROUP: Final = "Hello! I am this group's agent. Write to me, or use a command.\n\n"
_INTERRUPTED: Final = (
    "I was restarted while working on this message, so it was not finished. Please send it again."
)
_EDITED_SECRET: Final = (
    "An edited message in this chat held a credential. I deleted it, but others may have seen it: "
    "rotate that key. Edits are never run as commands; send the command as a new message."
)
_EDITED_SECRET_KEPT: Final = (
    "An edited message in this chat holds a credential, and I could not delete it: delete it "
    "yourself and rotate that key. In a group I need the admin right to delete messages."
)
_KEY_REFUSED: Final = (
    "That message looks like a key, so I deleted it and kept it from the conversation. "
    "To connect a server with it: /mcp_add <name> <url> --bearer, then send the key when I ask."
)
_KEY_REFUSED_KEPT: Final = (
    "That message looks like a key. I kept it from the conversation but could not delete it: "
    "delete it yourself and rotate the key. To connect a server: /mcp_add <name> <url> --bearer."
)
_MOVED: Final = (
    "This group is now a supergroup, with a new chat id. Its remote MCP servers, conversation "
    "and files came along: everything works as before."
)
_NOT_MOVED: Final = (
    "This group is now a supergroup, with a new chat id, and that chat already had files of its "
    "own, so the old group's servers, conversation and files were not moved. Nothing was deleted."
)
_MOVE_FAILED: Final = (
    "This group is now a supergroup, with a new chat id, and moving its servers, conversation "
    "and files there failed. It was logged; nothing was deleted."
)
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
    """Messages that may wait in one chat's queue; more are refused with a note."""
    stop_grace: float = 30.0
    """On a stop, how long running turns may go on; those still running are reported after the restart."""

    def __post_init__(self) -> None:
        for name in ("poll_timeout", "owner_ttl", "stop_grace"):
            check_seconds(self, name, positive=False)
        check_seconds(self, "typing_interval", positive=True)
        if not isinstance(self.max_queued, int) or isinstance(self.max_queued, bool) or self.max_queued < 1:
            raise ConfigError(
                f"TelegramSettings.max_queued must be a whole number >= 1, got {self.max_queued!r}"
            )
        if not isinstance(self.retry, RetryPolicy):
            raise ConfigError(
                f"TelegramSettings.retry must be a RetryPolicy, got {type(self.retry).__name__}"
            )


def _text(message: Message) -> str | None:
    # A caption is read like text: a photo captioned `/mcp_add … --bearer KEY` is a command too.
    return message.text if message.text is not None else message.caption


def _thread(message: Message) -> int | None:
    """The forum topic a message belongs to, which everything about it goes to."""
    return message.message_thread_id if message.is_topic_message else None


def _migration(message: Message) -> tuple[int, int] | None:
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
class _Queued:
    message: Message
    name: str
    """Its inbox record: kept until it is handled, so a restart handles it."""
    inbound: Inbound
    move: tuple[int, int] | None = None
    """For a group upgrade: the old and the new chat id."""


class TelegramBot:
    """Runs a host's chats on Telegram: ``await TelegramBot(host, bot).run()``.

    Each chat has a queue worked by one task at a time, so one chat's turns run in order while
    other chats go on. Secret answers bypass the queues: the command that waits for one holds
    its chat's queue. So do the commands sent while a question waits: one that only shows
    something runs at once, any other cancels the question and keeps its place in the queue. An update is acknowledged to Telegram only once it is handled or sealed
    into the inbox journal, and a reply is in the outbox journal until it is delivered.
    """

    def __init__(self, host: Host, bot: Bot, *, settings: TelegramSettings | None = None) -> None:
        self.host = host
        self.bot = bot
        self.settings = settings or TelegramSettings()
        install_outbound_gate()
        outbound_secrets().add([bot.token])
        data_dir = host.config.data_dir
        self.inbox = Journal.for_bot(data_dir, bot.token, "inbox")
        self.outbox = Outbox(
            bot, retry=self.settings.retry, journal=Journal.for_bot(data_dir, bot.token, "outbox")
        )
        self.owners = Owners(self.outbox, ttl=self.settings.owner_ttl)
        self.answers = PendingAnswers()
        self.buttons = Buttons(self.outbox)
        self.approvals = Approvals(self.outbox, self.buttons, self._decided)
        self.deletions = Deletions(self.outbox)
        self._queues: dict[int, deque[_Queued | Decision]] = {}
        self._idle = anyio.Event()
        self._stopping = False
        self._tg: TaskGroup | None = None
        self._username = ""
        self._offset: int | None = None
        """The next update id to ask for; everything before it has been taken."""

    # Running

    async def run(
        self,
        *,
        webhook: WebhookConfig | None = None,
        listening: Callable[[int], None] | None = None,
        stop: anyio.Event | None = None,
        redirect: RedirectRoute | None = None,
    ) -> None:
        """Serve until cancelled, or until ``stop`` is set: then stop gracefully.

        ``redirect`` (a login's redirect) is served by the webhook's listener, or with long
        polling by a listener of its own.

        A graceful stop takes no more updates, lets running turns finish within
        ``settings.stop_grace``, and leaves what is unfinished in the journals for the restart.
        """
        try:
            await self._start()
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await self.outbox.resume(tg)
                await self._recover()
                async with anyio.create_task_group() as intake:
                    if stop is not None:
                        intake.start_soon(self._stop_when, stop, intake.cancel_scope)
                    if webhook is None:
                        if redirect is not None:
                            intake.start_soon(serve_redirect, redirect)
                        await self._poll()
                    else:
                        await serve_webhook(
                            self.bot,
                            webhook,
                            self.dispatch,
                            allowed_updates=ALLOWED_UPDATES,
                            listening=listening,
                            redirect=redirect,
                        )
                # Only a stop ends the intake without cancelling this scope.
                await self._drain()
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            with anyio.move_on_after(_SHUTDOWN_TIMEOUT, shield=True):
                await self._stop()

    async def _stop_when(self, stop: anyio.Event, intake: anyio.CancelScope) -> None:
        await stop.wait()
        logger.info("stopping: no more updates are taken")
        self._stopping = True
        intake.cancel()

    async def _drain(self) -> None:
        """Let the running turns finish, within the grace; queued messages wait in the inbox."""
        if self._queues:
            with anyio.move_on_after(self.settings.stop_grace):
                await self._idle.wait()
        if self._queues:
            logger.warning("stopping with %d chats busy; they are told after the restart", len(self._queues))

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
        await self.outbox.set_description(DESCRIPTION, SHORT_DESCRIPTION)
        logger.info("Telegram bot @%s started", self._username)

    async def _stop(self) -> None:
        try:
            if self._offset is not None:
                # Confirms the updates already taken (handled, or sealed in the inbox).
                await self.bot.get_updates(offset=self._offset, timeout=0, limit=1)
        except TelegramError as exc:
            logger.info("confirming the last updates failed: %s", exc)
        finally:
            await self.bot.shutdown()

    async def _recover(self) -> None:
        """Handle what the last run left in the inbox: queued messages run, cut turns are reported."""
        for name, record in await anyio.to_thread.run_sync(self.inbox.load):
            if record.get("started"):
                await self.outbox.send(
                    int(record["chat_id"]),
                    render(_INTERRUPTED, markdown=False, redact=lambda text: text),
                    thread_id=record.get("thread_id"),
                    reply_to=record.get("message_id"),
                )
                await anyio.to_thread.run_sync(self.inbox.delete, name)
                continue
            raw = record.get("update")
            update = Update.de_json(raw, self.bot) if isinstance(raw, dict) else None
            if update is None:
                await anyio.to_thread.run_sync(self.inbox.delete, name)
                continue
            await self.dispatch(update)

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
                # Not cancelled half-way: the update is sealed, then counted as taken.
                with anyio.CancelScope(shield=True):
                    await self.dispatch(update)
                    self._offset = update.update_id + 1

    # Updates

    async def dispatch(self, update: Update) -> None:
        """Route one update; when this returns, it is handled or sealed in the inbox journal."""
        tg = self._tg
        if tg is None:
            return
        if update.callback_query is not None:
            await self.buttons.pressed(update.callback_query)
            return
        if update.edited_message is not None:
            await self._edited(tg, update.edited_message)
            return
        message = update.message  # channel posts and the rest are ignored
        if message is None or message.chat.type == message.chat.CHANNEL:
            return
        if (move := _migration(message)) is not None:
            # A question waiting in the old group is asked again in the new one, at once: the
            # turn that asks holds the move back until it ends.
            self.answers.move(*move)
            self.approvals.move(*move)
            # Queued in the new chat, ahead of its first messages; the second notice finds nothing to move.
            name = f"{update.update_id:020d}"
            await anyio.to_thread.run_sync(self.inbox.put, name, {"update": update.to_dict()})
            self._enqueue(move[1], _Queued(message, name, classify("", self.host.commands), move))
            return
        text = _text(message)
        if text is None:
            return
        chat_id = message.chat.id
        user = message.from_user
        inbound = classify(text, self.host.commands)
        if inbound.carries_secret:
            # Deleted at once, not when the chat's queue reaches the message.
            self.deletions.start(tg, chat_id, message.message_id)
        asker = user.id if user is not None and message.sender_chat is None else None
        if asker is not None and self.answers.waiting(chat_id, asker) is not None:
            if inbound.command is None:
                answer = Answer(
                    text, message.message_id, chat_id, credential_shaped=inbound.credential_shaped
                )
                if self.answers.offer(chat_id, asker, answer):
                    return
                # Not asked for (the question waits for a button): the message is the chat's.
            elif inbound.command.name == "cancel":
                self.answers.cancel(chat_id, asker)
                return
        if inbound.command is not None and self._for_another_bot(inbound.text):
            return
        if inbound.credential_shaped:
            # A key on its own — too early, too late, or refused as an answer — never reaches the model.
            tg.start_soon(self._refuse_key, message)
            return
        queue = self._queues.get(chat_id)
        if queue is not None and len(queue) >= self.settings.max_queued:
            logger.warning("chat %s has %d messages waiting; one was refused", chat_id, len(queue))
            tg.start_soon(
                self._note, message, "I am still busy with earlier messages; please send that again later."
            )
            return
        name = f"{update.update_id:020d}"
        await anyio.to_thread.run_sync(self.inbox.put, name, {"update": update.to_dict()})
        queued = _Queued(message, name, inbound)
        parsed = inbound.command
        if parsed is not None and self.answers.asked_in(chat_id):
            # A question holds the chat's queue: a command that only shows something runs beside
            # it; any other keeps its place in the queue, and cancels the question to get there.
            is_owner = asker is not None and asker == self.answers.owner_in(chat_id)
            if beside_a_question(parsed, self.host.commands, is_owner=is_owner):
                tg.start_soon(self._handle_now, queued)
                return
            if self.answers.cancel_for(chat_id, asker):
                tg.start_soon(self._note, message, cancelled_for(parsed.name))
        if parsed is not None and parsed.name == "stop":
            # /stop is for the turn at the head of the chat's queue: it cannot wait behind it.
            tg.start_soon(self._handle_now, queued)
            return
        self._enqueue(chat_id, queued)

    def _decided(self, decision: Decision) -> None:
        """The owner pressed an approval's button: its command waits its turn in the chat, like a typed one.

        Not kept in the inbox: its buttons do not survive a restart either.
        """
        self._enqueue(decision.waiting.chat_id, decision)

    def _enqueue(self, chat_id: int, queued: _Queued | Decision) -> None:
        tg = self._tg
        assert tg is not None
        queue = self._queues.get(chat_id)  # again: the chat's worker may have ended meanwhile
        if queue is None:
            self._queues[chat_id] = deque([queued])
            self._idle = anyio.Event()
            tg.start_soon(self._work, chat_id)
        else:
            queue.append(queued)

    def _for_another_bot(self, text: str) -> bool:
        head = text.lstrip().split(maxsplit=1)[0] if text.strip() else ""
        if "@" not in head:
            return False
        return head.partition("@")[2].lower() != self._username

    async def _note(self, message: Message, text: str) -> None:
        await self.outbox.send(
            message.chat.id,
            render(text, markdown=False, redact=lambda t: t),
            thread_id=_thread(message),
            reply_to=message.message_id if message.chat.type != message.chat.PRIVATE else None,
        )

    async def _refuse_key(self, message: Message) -> None:
        deleted = await self.deletions.delete(message.chat.id, message.message_id)
        self.deletions.forget(message.chat.id, message.message_id)
        await self._secret_deleted(message, deleted)
        await self._note(message, _KEY_REFUSED if deleted else _KEY_REFUSED_KEPT)

    async def _secret_deleted(self, message: Message, deleted: bool) -> None:
        """Tell the host of a message with a secret that this front end deleted (or could not),
        which never reached ``Host.handle``: the chat's extensions record it."""
        try:
            info = await self.owners.identify(message)
            session = await self.host.session(f"telegram:{message.chat.id}", owner=info.owner)
            self.host.secret_deleted(session, info.sender, deleted)
        except Exception as exc:  # boundary: a record missed must not end the bot's task group
            logger.warning(
                "a deleted secret in chat %s was not recorded: %s", message.chat.id, type(exc).__name__
            )

    async def _edited(self, tg: TaskGroup, message: Message) -> None:
        """An edit is never run or shown to the model; one that now holds a key is deleted."""
        text = _text(message)
        if text is None or message.chat.type == message.chat.CHANNEL:
            return
        if classify(text, self.host.commands).carries_secret:
            tg.start_soon(self._delete_edited, message)

    async def _delete_edited(self, message: Message) -> None:
        deleted = await self.deletions.delete(message.chat.id, message.message_id)
        self.deletions.forget(message.chat.id, message.message_id)
        await self._secret_deleted(message, deleted)
        await self.outbox.send(
            message.chat.id,
            render(_EDITED_SECRET if deleted else _EDITED_SECRET_KEPT, markdown=False, redact=lambda t: t),
            thread_id=_thread(message),
        )

    async def _work(self, chat_id: int) -> None:
        queue = self._queues[chat_id]
        try:
            while queue and not self._stopping:
                queued = queue[0]
                try:
                    if isinstance(queued, Decision):
                        await self._decide(queued)
                    else:
                        await self._handle(queued)
                finally:
                    queue.popleft()
                    if isinstance(queued, _Queued):
                        self.deletions.forget(chat_id, queued.message.message_id)
        finally:
            if self._queues.get(chat_id) is queue:
                del self._queues[chat_id]
            if not self._queues:
                self._idle.set()

    async def _handle_now(self, queued: _Queued) -> None:
        """Handle a message at once, beside the chat's queue."""
        try:
            await self._handle(queued)
        finally:
            self.deletions.forget(queued.message.chat.id, queued.message.message_id)

    async def _move(self, queued: _Queued, old_id: int, new_id: int) -> None:
        """Move a group's servers, history and workspace to its supergroup's id, and tell the group.

        Not marked as started in the inbox: a move cut by a restart is simply done again.
        """
        text: str | None = None
        try:
            creator = await self.owners.creator(new_id)
            outcome = await self.host.move_scope(
                f"telegram:{old_id}",
                f"telegram:{new_id}",
                owner=str(creator) if creator is not None else "unknown",
            )
            text = {"moved": _MOVED, "occupied": _NOT_MOVED}.get(outcome)
        except Exception as exc:  # boundary: a failed move is logged and told; the bot goes on
            logger.error(
                "moving chat %s to %s failed: %s",
                old_id,
                new_id,
                self.host.redact(None, "".join(traceback.format_exception(exc))),
            )
            text = _MOVE_FAILED
        delivery = None
        if text is not None:
            delivery = await self.outbox.post(new_id, render(text, markdown=False, redact=lambda t: t))
        await anyio.to_thread.run_sync(self.inbox.delete, queued.name)
        if delivery is not None:
            await self.outbox.deliver(delivery)

    async def _handle(self, queued: _Queued) -> None:
        if queued.move is not None:
            await self._move(queued, *queued.move)
            return
        message = queued.message
        chat = message.chat
        session: ChatSession | None = None
        ui: TelegramUI | None = None
        await anyio.to_thread.run_sync(
            self.inbox.put,
            queued.name,
            {
                "started": True,
                "chat_id": chat.id,
                "message_id": message.message_id,
                "thread_id": _thread(message),
            },
        )
        delivery = None
        try:
            info = await self.owners.identify(message)
            session = await self.host.session(f"telegram:{chat.id}", owner=info.owner)
            session.group = chat.type != chat.PRIVATE
            ui = self._ui(
                session,
                chat.id,
                thread_id=_thread(message),
                user_id=info.user_id,
                message_id=message.message_id,
                group=chat.type != chat.PRIVATE,
                owner_id=info.owner_id,
                sender=info.sender,
            )
            text = _text(message) or ""
            incoming = IncomingMessage(text=text, sender=info.sender, ref=message.message_id)
            parsed = queued.inbound.command
            if parsed is not None and parsed.name == "start" and self.host.commands.get("start") is None:
                # Telegram sends /start when a user opens a chat with the bot.
                welcome = _WELCOME if chat.type == chat.PRIVATE else _WELCOME_GROUP
                help_text = self.host.commands.help_text(for_owner=info.sender.is_owner)
                delivery = await ui.post(welcome + help_text, markdown=False)
            elif parsed is not None and parsed.name == "cancel" and self.host.commands.get("cancel") is None:
                delivery = await ui.post(NOTHING_TO_CANCEL, markdown=False)
            else:
                async with self._typing(ui, chat.id) if parsed is None else nullcontext():
                    reply = await self.host.handle(session, incoming, ui)
                if reply is not None:
                    delivery = await ui.post(reply.text, markdown=reply.kind == "agent")
        except Exception as exc:  # boundary: one message's failure is answered; the bot goes on
            detail = "".join(traceback.format_exception(exc))
            redacted = self.host.redact(session, detail)
            logger.error("handling a message in chat %s failed:\n%s", chat.id, redacted)
            if ui is not None:
                delivery = await ui.post(_SORRY, markdown=False)
            else:
                delivery = await self.outbox.post(chat.id, render(_SORRY, markdown=False, redact=lambda t: t))
        # The reply is in the outbox journal: the message is handled.
        await anyio.to_thread.run_sync(self.inbox.delete, queued.name)
        if delivery is not None:
            await self.outbox.deliver(delivery)

    async def _decide(self, decision: Decision) -> None:
        """Run a pressed approval's command as the owner, in the chat the servers belong to.

        The same path as the command typed there: ``Host.handle`` checks that the sender is the
        chat's owner (as the chat's owner is now) and that the changes are still the ones shown.
        """
        waiting = decision.waiting
        if waiting.superseded:
            return  # a newer approval came meanwhile; this message says so already
        chat_id = waiting.chat_id
        session: ChatSession | None = None
        text = _SORRY
        try:
            owner_id = await self.owners.owner_of(chat_id, private=not waiting.group)
            session = await self.host.session(
                f"telegram:{chat_id}", owner=str(owner_id) if owner_id is not None else "unknown"
            )
            session.group = waiting.group
            sender = Sender(str(waiting.owner_id), "owner", is_owner=waiting.owner_id == owner_id)
            ui = self._ui(
                session,
                chat_id,
                thread_id=waiting.thread_id,
                user_id=waiting.owner_id,
                message_id=None,
                group=waiting.group,
                owner_id=owner_id,
                sender=sender,
            )
            reply = await self.host.handle(session, IncomingMessage(decision.command, sender), ui)
            text = reply.text if reply is not None else _SORRY
        except Exception as exc:  # boundary: a failed decision is logged and shown; the bot goes on
            detail = "".join(traceback.format_exception(exc))
            logger.error("an approval in chat %s failed:\n%s", chat_id, self.host.redact(session, detail))
        await self.approvals.close(waiting, one_part(text, redact=partial(self.host.redact, session)))

    def _ui(
        self,
        session: ChatSession,
        chat_id: int,
        *,
        thread_id: int | None,
        user_id: int | None,
        message_id: int | None,
        group: bool,
        owner_id: int | None,
        sender: Sender,
    ) -> TelegramUI:
        """The front end a command or turn of ``session`` acts through, in ``chat_id`` (and topic),
        for ``sender`` (whose secret answers it deletes)."""
        return TelegramUI(
            self.outbox,
            self.deletions,
            self.answers,
            self.buttons,
            self.approvals,
            chat_id=chat_id,
            thread_id=thread_id,
            user_id=user_id,
            message_id=message_id,
            redact=partial(self.host.redact, session),
            group=group,
            owner_id=owner_id,
            secret_deleted=partial(self.host.secret_deleted, session, sender),
        )

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
    stop: anyio.Event | None = None,
    redirect: RedirectRoute | None = None,
) -> None:
    """Run ``host``'s chats as a Telegram bot until cancelled, or gracefully until ``stop`` is set.

    ``redirect`` serves logins' redirects: on the webhook's listener, or with long polling on a
    listener of its own (``redirect.listen``, ``redirect.port``).
    """
    settings = settings or TelegramSettings()
    # Before the bot is built: every Bot API URL holds the token, and httpx logs each at INFO.
    install_outbound_gate()
    outbound_secrets().add([token])
    quiet_raw_traffic()
    bot = build_bot(token, base_url=base_url, poll_timeout=settings.poll_timeout)
    await TelegramBot(host, bot, settings=settings).run(
        webhook=webhook, listening=listening, stop=stop, redirect=redirect
    )
