"""Running one chat's queued work through the host: a message, an approval's press, a group's move.

Each runs in its chat's worker (``TelegramBot``), one at a time; what it replies is put in the
outbox journal before its update leaves the inbox journal, so a restart neither loses nor
repeats it.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from dataclasses import KW_ONLY, dataclass, replace
from functools import partial

import anyio
from telegram import Message

from ..agent import Host
from ..core import MAX_ATTACHMENT, NOTHING_TO_CANCEL, ChatSession, IncomingMessage, Sender
from ._approval_messages import ApprovalPress
from ._files import FILE_SECRET, FILE_SECRET_KEPT, Received, file_of, receive
from ._journal import Journal
from ._live import LiveMessage, Place
from ._notices import (
    EDITED_SECRET,
    EDITED_SECRET_KEPT,
    KEY_REFUSED,
    KEY_REFUSED_KEPT,
    MOVE_FAILED,
    MOVED,
    NOT_MOVED,
    SORRY,
    WELCOME,
    WELCOME_GROUP,
)
from ._owner import CommandChat, Owners, SenderInfo, owner_name
from ._panel import PanelPress
from ._parts import BotParts
from ._render import one_part, plain, render
from ._ui import TelegramUI
from ._updates import Queued, note, text_of, thread_of

__all__ = ["MessageHandler"]

logger = logging.getLogger(__name__)


@dataclass(eq=False, repr=False)
class MessageHandler:
    """Runs a chat's queued messages and approval presses as the host's turns and commands."""

    host: Host
    parts: BotParts
    _: KW_ONLY
    inbox: Journal
    """Updates taken from Telegram and not yet handled: what a restart handles."""
    owners: Owners
    typing_interval: float
    max_file: int = MAX_ATTACHMENT

    async def refuse_key(self, message: Message) -> None:
        deleted = await self.parts.deletions.delete(message.chat.id, message.message_id)
        self.parts.deletions.forget(message.chat.id, message.message_id)
        await self.secret_deleted(message, deleted)
        await note(self.parts.outbox, message, KEY_REFUSED if deleted else KEY_REFUSED_KEPT)

    async def secret_deleted(self, message: Message, deleted: bool) -> None:
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

    async def delete_edited(self, message: Message) -> None:
        deleted = await self.parts.deletions.delete(message.chat.id, message.message_id)
        self.parts.deletions.forget(message.chat.id, message.message_id)
        await self.secret_deleted(message, deleted)
        await self.parts.outbox.send(
            message.chat.id,
            plain(EDITED_SECRET if deleted else EDITED_SECRET_KEPT),
            thread_id=thread_of(message),
        )

    async def move(self, queued: Queued, old_id: int, new_id: int) -> None:
        """Move a group's servers, history and workspace to its supergroup's id, and tell the group.

        Not marked as started in the inbox: a move cut by a restart is simply done again.
        """
        text: str | None = None
        try:
            creator = await self.owners.creator(new_id)
            outcome = await self.host.move_scope(
                f"telegram:{old_id}",
                f"telegram:{new_id}",
                owner=owner_name(creator),
            )
            text = {"moved": MOVED, "occupied": NOT_MOVED}.get(outcome)
        except Exception as exc:  # boundary: a failed move is logged and told; the bot goes on
            logger.error(
                "moving chat %s to %s failed: %s",
                old_id,
                new_id,
                self.host.redact(None, "".join(traceback.format_exception(exc))),
            )
            text = MOVE_FAILED
        delivery = None
        if text is not None:
            delivery = await self.parts.outbox.post(new_id, plain(text))
        await self.inbox.delete(queued.name)
        if delivery is not None:
            await self.parts.outbox.deliver(delivery)

    async def handle(self, queued: Queued) -> None:
        if queued.move is not None:
            await self.move(queued, *queued.move)
            return
        message = queued.message
        chat = message.chat
        session: ChatSession | None = None
        ui: TelegramUI | None = None
        await self.inbox.put(
            queued.name,
            chat.id,
            {
                "started": True,
                "chat_id": chat.id,
                "message_id": message.message_id,
                "thread_id": thread_of(message),
            },
        )
        delivery = None
        try:
            info = await self.owners.identify(message)
            session = await self.host.session(f"telegram:{chat.id}", owner=info.owner)
            place = _place_of(message)
            session.group = not place.private
            ui = self._ui(session, place, info)
            text = text_of(message) or ""
            parsed = queued.inbound.command
            # A file captioned with a command is the command's: it is not kept.
            received = await self._received(message, session) if parsed is None else None
            attachments = (received.attachment,) if received and received.attachment else ()
            incoming = IncomingMessage(text, info.sender, message.message_id, attachments)
            if parsed is not None and parsed.name == "start" and self.host.commands.get("start") is None:
                # Telegram sends /start when a user opens a chat with the bot.
                welcome = WELCOME if chat.type == chat.PRIVATE else WELCOME_GROUP
                help_text = self.host.commands.help_text(for_owner=info.sender.is_owner)
                delivery = await ui.post(welcome + help_text, markdown=False, answers=queued.name)
            elif parsed is not None and parsed.name == "cancel" and self.host.commands.get("cancel") is None:
                delivery = await ui.post(NOTHING_TO_CANCEL, markdown=False, answers=queued.name)
            elif received is not None and received.attachment is None:
                delivery = await ui.post(received.refusal, markdown=False, answers=queued.name)
            else:
                live = self._live(ui, session, place) if parsed is None else None
                async with (
                    self._typing(ui, chat.id) if parsed is None else nullcontext(),
                    live.running() if live is not None else nullcontext(),
                ):
                    reply = await self.host.handle(session, incoming, ui, live=live)
                markdown = reply is not None and reply.kind == "agent"
                if reply is not None and not (live and await live.finish(reply.text, markdown=markdown)):
                    delivery = await ui.post(reply.text, markdown=markdown, answers=queued.name)
        except Exception as exc:  # boundary: one message's failure is answered; the bot goes on
            detail = "".join(traceback.format_exception(exc))
            redacted = self.host.redact(session, detail)
            logger.error("handling a message in chat %s failed:\n%s", chat.id, redacted)
            if ui is not None:
                delivery = await ui.post(SORRY, markdown=False, answers=queued.name)
            else:
                delivery = await self.parts.outbox.post(chat.id, plain(SORRY), answers=queued.name)
        # The reply is in the outbox journal: the message is handled.
        await self.inbox.delete(queued.name)
        if delivery is not None:
            await self.parts.outbox.deliver(delivery)

    async def _received(self, message: Message, session: ChatSession) -> Received | None:
        """The photo or document of ``message`` kept in the chat's workspace, or why not; None: it has none.

        One that holds a credential is withheld as a message holding a key is: deleted, and recorded.
        """
        sent = file_of(message)
        if sent is None:
            return None
        received = await receive(
            self.parts.outbox.bot,
            sent,
            cap=self.max_file,
            workspace=session.files,
            commands=self.host.commands,
            known=self.host.redactor(session),
        )
        if received.outcome != "secret":
            return received
        deleted = await self.parts.deletions.delete(message.chat.id, message.message_id)
        await self.secret_deleted(message, deleted)
        return replace(received, refusal=FILE_SECRET if deleted else FILE_SECRET_KEPT)

    async def decide(self, press: ApprovalPress) -> None:
        """Run a pressed approval's command as the owner, in the chat the servers belong to.

        The same path as the command typed there: ``Host.handle`` checks that the sender is the
        chat's owner (as the chat's owner is now) and that the changes are still the ones shown.
        """
        waiting = press.waiting
        if waiting.superseded:
            return  # a newer approval came meanwhile; this message says so already
        text, redact = await self._as_owner(press.command, waiting.chat)
        await self.parts.approvals.close(waiting, one_part(text, redact=redact))

    async def act(self, press: PanelPress) -> None:
        """Run a panel's action as the owner, in the chat the servers belong to, as ``decide`` does.

        The action's command checks that the server is still the one the panel showed. Its reply
        replaces the panel (an action that changed something) or comes beside it.
        """
        shown = press.shown
        text, redact = await self._as_owner(press.action.command, shown.chat)
        if press.action.changes:
            await self.parts.panels.close(shown, one_part(text, redact=redact))
        else:
            await self.parts.panels.answer(shown, render(text, markdown=False, redact=redact))

    async def _as_owner(self, command: str, chat: CommandChat) -> tuple[str, Callable[[str], str]]:
        """Run ``command`` in ``chat`` as the one who pressed a button meant for its owner (the
        owner then); its reply (or why it failed), and the chat's redaction for it."""
        chat_id, presser = chat.chat_id, chat.owner_id
        session: ChatSession | None = None
        text = SORRY
        try:
            owner_id = await self.owners.owner_of(chat_id, private=not chat.group)
            session = await self.host.session(f"telegram:{chat_id}", owner=owner_name(owner_id))
            session.group = chat.group
            sender = Sender(str(presser), "owner", is_owner=presser == owner_id)
            place = Place(chat_id=chat_id, thread_id=chat.thread_id, message_id=None, private=not chat.group)
            ui = self._ui(session, place, SenderInfo(sender, presser, owner_id))
            reply = await self.host.handle(session, IncomingMessage(command, sender), ui)
            text = reply.text if reply is not None else SORRY
        except Exception as exc:  # boundary: a failed action is logged and shown; the bot goes on
            detail = "".join(traceback.format_exception(exc))
            logger.error(
                "a button's command in chat %s failed:\n%s", chat_id, self.host.redact(session, detail)
            )
        return text, partial(self.host.redact, session)

    def _ui(self, session: ChatSession, place: Place, info: SenderInfo) -> TelegramUI:
        """The front end a command or turn of ``session`` acts through, at ``place``, for
        ``info``'s sender (whose secret answers it deletes)."""
        return TelegramUI(
            self.parts,
            chat_id=place.chat_id,
            thread_id=place.thread_id,
            user_id=info.user_id,
            message_id=place.message_id,
            redact=partial(self.host.redact, session),
            group=not place.private,
            owner_id=info.owner_id,
            secret_deleted=partial(self.host.secret_deleted, session, info.sender),
        )

    def _live(self, ui: TelegramUI, session: ChatSession, place: Place) -> LiveMessage:
        """A turn's live message, which also shows its calls' progress: a draft in a private chat,
        a message edited as the reply grows elsewhere."""
        ui.live = LiveMessage(
            self.parts.outbox,
            place,
            redactor=partial(self.host.redactor, session),
            redact=partial(self.host.redact, session),
        )
        return ui.live

    @asynccontextmanager
    async def _typing(self, ui: TelegramUI, chat_id: int) -> AsyncIterator[None]:
        """Show "typing…" in the chat while the block runs."""

        async def keep_typing() -> None:
            while True:
                await self.parts.outbox.typing(chat_id, ui.thread_id)
                await anyio.sleep(self.typing_interval)

        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_typing)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()


def _place_of(message: Message) -> Place:
    """Where ``message`` is, and where its answers and its turn's live message go."""
    chat = message.chat
    return Place(
        chat_id=chat.id,
        thread_id=thread_of(message),
        message_id=message.message_id,
        private=chat.type == chat.PRIVATE,
    )
