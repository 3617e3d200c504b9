"""The Telegram front end: updates in, one queue and one session per chat, replies out."""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Final

import anyio
from anyio.abc import TaskGroup
from telegram import Bot, Message, Update
from telegram.error import InvalidToken, TelegramError

from ..agent import Host
from ..core import (
    Gauge,
    Inbound,
    Storage,
    beside_a_question,
    cancelled_for,
    classify,
    install_outbound_gate,
    outbound_secrets,
)
from ..exceptions import ConfigError
from ._answers import AnswerMessage, PendingAnswers
from ._approval_messages import ApprovalMessages, ApprovalPress
from ._buttons import Buttons
from ._deletions import Deletions
from ._files import file_of
from ._handler import MessageHandler
from ._health import Operations
from ._journal import Journal, bot_id
from ._leases import Leases
from ._logs import quiet_raw_traffic
from ._notices import DESCRIPTION, SHORT_DESCRIPTION
from ._outbox import Outbox
from ._owner import Owners
from ._panel import PanelMessages, PanelPress
from ._parts import BotParts
from ._polling import ALLOWED_UPDATES, Poller
from ._recovery import left_behind
from ._serving import Serving
from ._settings import TelegramSettings, build_bot
from ._updates import Queued, migration_of, note, posted_note, text_of
from ._webhook import serve_listener, serve_webhook

__all__ = ["ALLOWED_UPDATES", "TelegramBot", "run_telegram"]

logger = logging.getLogger(__name__)

_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
_SHUTDOWN_TIMEOUT: Final = 5.0


class TelegramBot:
    """Runs a host's chats on Telegram: ``await TelegramBot(host, bot).run()``.

    Each chat has a queue worked by one task at a time, so one chat's turns run in order while
    other chats go on. Secret answers bypass the queues: the command that waits for one holds
    its chat's queue. So do the commands sent while a question waits: one that only shows
    something runs at once, any other cancels the question and keeps its place in the queue.
    An update is acknowledged to Telegram only once it is handled or sealed into the inbox
    journal, and a reply is in the outbox journal until it is delivered.
    """

    def __init__(
        self,
        host: Host,
        bot: Bot,
        *,
        settings: TelegramSettings | None = None,
        storage: Storage | None = None,
    ) -> None:
        self.host = host
        self.bot = bot
        self.settings = settings or TelegramSettings()
        install_outbound_gate()
        outbound_secrets().add([bot.token])
        data_dir = host.config.data_dir
        if storage is None:
            self.inbox = Journal.for_bot(data_dir, bot.token, "inbox")
            outbox = Journal.for_bot(data_dir, bot.token, "outbox")
        else:
            self.inbox = Journal.in_rows(storage.inbox, bot.token, "inbox")
            outbox = Journal.in_rows(storage.outbox, bot.token, "outbox")
        self.outbox = Outbox(bot, retry=self.settings.retry, journal=outbox)
        # With a database, the chats this process serves of the bot's (None: it serves every chat).
        self.leases: Leases | None = None
        if storage is not None:
            seconds, idle = self.settings.lease_seconds, host.config.session_idle
            self.leases = Leases(
                storage.leases,
                bot=bot_id(bot.token),
                inbox=self.inbox,
                outbox=self.outbox,
                seconds=seconds,
                idle=idle,
            )
        self.owners = Owners(self.outbox, ttl=self.settings.owner_ttl)
        self.answers = PendingAnswers()
        self.buttons = Buttons(self.outbox)
        self.approvals = ApprovalMessages(self.outbox, self.buttons, self._decided)
        self.deletions = Deletions(self.outbox)
        self.panels = PanelMessages(self.outbox, self.buttons, self._decided)
        parts = BotParts(self.outbox, self.answers, self.buttons, self.approvals, self.deletions, self.panels)
        self.handler = MessageHandler(
            host,
            parts,
            inbox=self.inbox,
            owners=self.owners,
            typing_interval=self.settings.typing_interval,
            max_file=self.settings.max_file,
        )
        self._queues: dict[int, deque[Queued | ApprovalPress | PanelPress]] = {}
        self._workers: dict[int, anyio.CancelScope] = {}
        self._idle = anyio.Event()
        self._stopping = False
        self._tg: TaskGroup | None = None
        self._username = ""
        self.poller = Poller(bot, timeout=self.settings.poll_timeout)

    # Running

    async def run(self, serving: Serving | None = None) -> None:
        """Serve as ``serving`` says (long polling by default) until cancelled, or until its
        ``stop`` is set: then stop gracefully.

        A graceful stop takes no more updates, lets running turns finish within
        ``settings.stop_grace``, and leaves what is unfinished in the journals for the restart.
        """
        serving = serving or Serving()
        webhook, redirect = serving.webhook, serving.redirect
        if webhook is not None:
            outbound_secrets().add([webhook.secret_token])  # whoever knows it can post updates
        try:
            await self._start()
            async with anyio.create_task_group() as tg:
                self._tg = tg
                if self.leases is None:
                    resumed = await self.outbox.resume(tg)
                    await self._recover({d.answers for d in resumed if d.answers})
                else:
                    # Each chat's records are recovered by the process that takes the chat.
                    tg.start_soon(
                        partial(self.leases.run, tg, route=self.route, drop=self._drop, busy=self._busy)
                    )
                async with anyio.create_task_group() as intake:
                    if serving.stop is not None:
                        intake.start_soon(self._stop_when, serving.stop, intake.cancel_scope)
                    operations = self._operations(serving.probe)
                    if webhook is None:
                        if serving.listen is not None:
                            serve = partial(
                                serve_listener, serving.listen, redirect=redirect, operations=operations
                            )
                            intake.start_soon(serve)
                        poll = partial(self.poller.run, self.receive)
                        if self.leases is None:
                            await poll()
                        else:
                            await self.leases.lead("poller", poll)
                    else:
                        await serve_webhook(
                            self.bot,
                            webhook,
                            self.receive,
                            allowed_updates=ALLOWED_UPDATES,
                            listening=serving.listening,
                            redirect=redirect,
                            operations=operations,
                        )
                # Only a stop ends the intake without cancelling this scope.
                await self._drain()
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            if self.leases is not None:
                await self.leases.release_all()
            with anyio.move_on_after(_SHUTDOWN_TIMEOUT, shield=True):
                await self._stop()

    def _operations(self, probe: Callable[[], Awaitable[None]] | None) -> Operations:
        gauges = (
            Gauge(
                "playa_chats_held",
                "Chats with an open session in this process.",
                lambda: self.host.open_sessions,
            ),
            Gauge(
                "playa_outbox_depth",
                "Replies waiting for their delivery to Telegram.",
                lambda: self.outbox.depth,
            ),
        )
        return Operations(gauges=gauges, probe=probe)

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
            await self.poller.confirm()
        finally:
            await self.bot.shutdown()

    async def _recover(self, answered: set[str]) -> None:
        """Handle what the last run left in the inbox: queued messages run, cut turns are
        reported (unless ``answered``: their replies were written)."""
        for name, record in await self.inbox.load():
            update = await left_behind(self.inbox, self.outbox, name, record, answered=answered)
            if update is not None:
                await self.route(update, name)

    # Updates

    async def receive(self, update: Update) -> None:
        """Take one update from Telegram; when this returns, it is handled or sealed in the inbox."""
        if self.leases is None or not await self.leases.receive(update):
            await self.route(update, None)

    async def route(self, update: Update, stored: str | None) -> None:
        """Route one update: ``stored`` names its inbox record when it has one already (with a
        database, the chat's holder routes what any process received). A record the update does
        not end up queued with is handled now."""
        tg = self._tg
        if tg is None:
            return
        queued = await self._route(tg, update, stored)
        if stored is not None and not queued:
            await self.inbox.delete(stored)

    async def _route(self, tg: TaskGroup, update: Update, stored: str | None) -> bool:
        """Whether the update now waits in a queue (or runs) with its inbox record."""
        if update.callback_query is not None:
            await self.buttons.pressed(update.callback_query)
            return False
        if update.edited_message is not None:
            await self._edited(tg, update.edited_message)
            return False
        message = update.message  # channel posts and the rest are ignored
        if message is None or message.chat.type == message.chat.CHANNEL:
            return False
        if (move := migration_of(message)) is not None:
            # A question waiting in the old group is asked again in the new one, at once: the
            # turn that asks holds the move back until it ends.
            self.answers.move(*move)
            self.approvals.move(*move)
            self.panels.move(*move)
            # Queued in the new chat, ahead of its first messages; the second notice finds nothing to move.
            name = stored or await self._store(update)
            self._enqueue(move[1], Queued(message, name, classify("", self.host.commands), move))
            return True
        text = text_of(message)
        sent = file_of(message)
        if text is None and sent is None:
            return False
        chat_id = message.chat.id
        user = message.from_user
        # A caption is classified as a message is; the file itself, once it is taken (the handler).
        inbound = classify(text or "", self.host.commands)
        if inbound.carries_secret:
            # Deleted at once, not when the chat's queue reaches the message.
            self.deletions.start(tg, chat_id, message.message_id)
        asker = user.id if user is not None and message.sender_chat is None else None
        if asker is not None and sent is None and self._answered(message, asker, inbound):
            return False
        if inbound.command is not None and self._for_another_bot(inbound.text):
            return False
        if inbound.credential_shaped:
            # A key on its own — too early, too late, or refused as an answer — never reaches the model.
            tg.start_soon(self.handler.refuse_key, message)
            return False
        queue = self._queues.get(chat_id)
        if queue is not None and len(queue) >= self.settings.max_queued:
            logger.warning("chat %s has %d messages waiting; one was refused", chat_id, len(queue))
            tg.start_soon(
                note,
                self.outbox,
                message,
                "I am still busy with earlier messages; please send that again later.",
            )
            return False
        queued = Queued(message, stored or await self._store(update), inbound)
        parsed = inbound.command
        if parsed is not None and self.answers.asked_in(chat_id):
            # A question holds the chat's queue: a command that only shows something runs beside
            # it; any other keeps its place in the queue, and cancels the question to get there.
            is_owner = asker is not None and asker == self.answers.owner_in(chat_id)
            if beside_a_question(parsed, self.host.commands, is_owner=is_owner):
                tg.start_soon(self._handle_now, queued)
                return True
            if self.answers.cancels(chat_id, asker):
                await self._cancel_question(tg, message, asker, parsed.name)
        if parsed is not None and parsed.name == "stop":
            # /stop is for the turn at the head of the chat's queue: it cannot wait behind it.
            tg.start_soon(self._handle_now, queued)
            return True
        self._enqueue(chat_id, queued)
        return True

    async def _cancel_question(
        self, tg: TaskGroup, message: Message, asker: int | None, command: str
    ) -> None:
        """``command`` cancels the questions waiting in the chat that ``asker`` may cancel, and says so.

        The note is in the journal, and its delivery has its place in the chat's order, before
        any question hears of it: the question's own reply ("No answer came…") follows it.
        """
        chat_id = message.chat.id
        told = await posted_note(self.outbox, message, cancelled_for(command))
        if not self.answers.cancels(chat_id, asker):
            await self.outbox.discard(told)  # the question ended while the note was written
            return
        tg.start_soon(self.outbox.deliver, told)
        self.answers.cancel_for(chat_id, asker)

    async def _store(self, update: Update) -> str:
        """Seal ``update`` into the inbox (one process, no database); its record's name."""
        name = f"{update.update_id:020d}"
        message = update.effective_message
        await self.inbox.put(
            name, message.chat.id if message is not None else 0, {"update": update.to_dict()}
        )
        return name

    def _answered(self, message: Message, asker: int, inbound: Inbound) -> bool:
        """Whether ``message`` answers (or cancels) a question waiting for ``asker`` in its chat."""
        chat_id = message.chat.id
        if self.answers.waiting(chat_id, asker) is None:
            return False
        if inbound.command is None:
            answer = AnswerMessage(
                inbound.text, message.message_id, chat_id, credential_shaped=inbound.credential_shaped
            )
            # Not asked for (the question waits for a button): the message is the chat's.
            return self.answers.offer(chat_id, asker, answer)
        if inbound.command.name == "cancel":
            self.answers.cancel(chat_id, asker)
            return True
        return False

    def _decided(self, press: ApprovalPress | PanelPress) -> None:
        """The owner pressed an approval's or a panel's button: its command waits its turn in the
        chat, like a typed one.

        Not kept in the inbox: its buttons do not survive a restart either.
        """
        chat = press.waiting.chat if isinstance(press, ApprovalPress) else press.shown.chat
        self._enqueue(chat.chat_id, press)

    def _enqueue(self, chat_id: int, queued: Queued | ApprovalPress | PanelPress) -> None:
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

    async def _edited(self, tg: TaskGroup, message: Message) -> None:
        """An edit is never run or shown to the model; one that now holds a key is deleted."""
        text = text_of(message)
        if text is None or message.chat.type == message.chat.CHANNEL:
            return
        if classify(text, self.host.commands).carries_secret:
            tg.start_soon(self.handler.delete_edited, message)

    def _busy(self, chat_id: int) -> bool:
        """Whether the chat has work here: messages queued or running, or a question waiting."""
        return chat_id in self._queues or bool(self.answers.asked_in(chat_id))

    async def _drop(self, chat_id: int) -> None:
        """Stop the chat's work here (another process serves it now, or it was idle), and close
        its session: its servers disconnect."""
        scope = self._workers.pop(chat_id, None)
        if scope is not None:
            scope.cancel()
        self._queues.pop(chat_id, None)
        if not self._queues:
            self._idle.set()
        await self.host.evict_idle(0.0, scopes=[f"telegram:{chat_id}"])

    async def _work(self, chat_id: int) -> None:
        queue = self._queues[chat_id]
        with anyio.CancelScope() as scope:
            self._workers[chat_id] = scope
            await self._work_queue(chat_id, queue)
        if self._workers.get(chat_id) is scope:
            del self._workers[chat_id]

    async def _work_queue(self, chat_id: int, queue: deque[Queued | ApprovalPress | PanelPress]) -> None:
        try:
            while queue and not self._stopping:
                queued = queue[0]
                try:
                    if isinstance(queued, ApprovalPress):
                        await self.handler.decide(queued)
                    elif isinstance(queued, PanelPress):
                        await self.handler.act(queued)
                    else:
                        await self.handler.handle(queued)
                finally:
                    queue.popleft()
                    if isinstance(queued, Queued):
                        self.deletions.forget(chat_id, queued.message.message_id)
        finally:
            if self._queues.get(chat_id) is queue:
                del self._queues[chat_id]
            if not self._queues:
                self._idle.set()

    async def _handle_now(self, queued: Queued) -> None:
        """Handle a message at once, beside the chat's queue."""
        try:
            await self.handler.handle(queued)
        finally:
            self.deletions.forget(queued.message.chat.id, queued.message.message_id)


async def run_telegram(
    host: Host,
    *,
    token: str,
    base_url: str | None = None,
    settings: TelegramSettings | None = None,
    serving: Serving | None = None,
    storage: Storage | None = None,
) -> None:
    """Run ``host``'s chats as a Telegram bot, served as ``serving`` says (long polling by
    default), until cancelled, or gracefully once its ``stop`` is set.

    With ``storage`` (a database) the updates and replies are kept in its rows, and this process
    is one of several that serve the bot: each chat is served by the process holding its lease.
    """
    settings = settings or TelegramSettings()
    # Before the bot is built: every Bot API URL holds the token, and httpx logs each at INFO.
    install_outbound_gate()
    outbound_secrets().add([token])
    quiet_raw_traffic()
    bot = build_bot(token, base_url=base_url, poll_timeout=settings.poll_timeout)
    await TelegramBot(host, bot, settings=settings, storage=storage).run(serving)
