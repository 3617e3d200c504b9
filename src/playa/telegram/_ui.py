"""The host's UI seam for one Telegram message: replies, secret questions and deletions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import anyio
from anyio.abc import TaskGroup
from telegram import ForceReply, InlineKeyboardMarkup

from ..host import QUESTION_TIMEOUT, Answer, Approval, MessageRef, Question, render_approval
from ._answers import PendingAnswers
from ._buttons import Buttons
from ._markdown import render_markdown
from ._outbox import Delivery, Outbox
from ._split import Part, split_formatted

__all__ = ["ANSWER_NOT_DELETED", "CANCEL", "PROGRESS_EVERY", "Deletions", "TelegramUI", "render"]

logger = logging.getLogger(__name__)

ANSWER_NOT_DELETED: Final = (
    "I could not delete your answer, and it holds a credential: delete it yourself, and rotate "
    "the key, since others may have seen it. In a group I need the admin right to delete messages."
)
CANCEL: Final = "Cancel"
_ASK_HINT: Final = "\n\nPress Cancel, or send /cancel, to stop."
_REPLY_HINT: Final = "\n\nAnswer by replying to this message."
_CANCEL_HINT: Final = "Press Cancel, or send /cancel, to stop the question."
PROGRESS_EVERY: Final = 2.0
"""Seconds between two edits of a call's progress message: Telegram limits edits, and a server may
report a thousand times a second."""


@dataclass(eq=False)
class _ProgressMessage:
    message_id: int | None
    edited: float
    """When it was sent or last edited (the event loop's clock)."""


def render(text: str, *, markdown: bool, redact: Callable[[str], str]) -> list[Part]:
    """``text`` as the messages that carry it: redacted first, then formatted, then split.

    A credential that markup splits (``sk-ab**cd**ef``) is whole again in the rendered text,
    so that text is checked too; if it still holds one, it is sent plain and redacted.
    """
    text = redact(text)
    if not markdown:
        return split_formatted(text, [])
    plain, spans = render_markdown(text)
    cleaned = redact(plain)
    if cleaned != plain:
        return split_formatted(cleaned, [])
    return split_formatted(plain, spans)


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


class TelegramUI:
    """What the host and its commands may do in the chat (and topic) a message came from."""

    def __init__(
        self,
        outbox: Outbox,
        deletions: Deletions,
        answers: PendingAnswers,
        buttons: Buttons,
        *,
        chat_id: int,
        thread_id: int | None,
        user_id: int | None,
        message_id: int,
        redact: Callable[[str], str],
        group: bool,
    ) -> None:
        self._outbox = outbox
        self._deletions = deletions
        self._answers = answers
        self._buttons = buttons
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._user_id = user_id
        self._message_id = message_id
        self._redact = redact
        self._group = group
        """A group has members besides the owner: replies quote the message they answer, notices go out."""
        self._progress: dict[str, _ProgressMessage] = {}

    @property
    def thread_id(self) -> int | None:
        """The forum topic the message came from, which replies go to."""
        return self._thread_id

    async def send(self, text: str) -> MessageRef | None:
        """Send plain text to the chat, redacted; in groups it answers the message it is about."""
        return await self._outbox.deliver(await self.post(text, markdown=False))

    async def post(self, text: str, *, markdown: bool) -> Delivery:
        """Queue a reply durably (redacted, formatted when ``markdown``); ``Outbox.deliver`` sends it."""
        return await self._outbox.post(
            self._chat_id,
            render(text, markdown=markdown, redact=self._redact),
            thread_id=self._thread_id,
            reply_to=self._message_id if self._group else None,
        )

    async def send_private(self, text: str) -> MessageRef | None:
        """Send plain text, redacted, in the sender's private chat with the bot (never the group)."""
        if self._user_id is None:
            return None  # an anonymous sender has no private chat to reach
        # Not journaled: a login link that waits out a restart has expired by then.
        return await self._outbox.send(
            self._user_id, render(text, markdown=False, redact=self._redact), durable=False
        )

    async def ask(self, question: str, *, secret: bool = False, timeout: float = 300.0) -> str | None:
        """Ask the sender; their next plain message in this chat is the answer, deleted when secret.

        The answer never becomes a chat message for the host: the dispatcher hands it here. A
        command is never an answer; the Cancel button or ``/cancel`` ends the question.
        """
        user_id = self._user_id
        if user_id is None:
            return None  # an anonymous sender cannot be told apart from the chat's other admins
        with (
            self._answers.expect(self._chat_id, user_id, thread_id=self._thread_id) as waiter,
            self._buttons.keyboard(self._chat_id, user_id, [CANCEL], lambda _: waiter.settle(None)) as markup,
        ):
            if self._group:
                # With privacy mode on (a group's default) the bot sees a member's plain message
                # only when it replies to one of the bot's: ForceReply opens that reply on the
                # asker's client (``selective``: the question replies to their message, so only
                # theirs). A message carries one markup, so Cancel comes in a second message.
                question_id = await self._ask_part(
                    question + _REPLY_HINT, reply_to=self._message_id, markup=ForceReply(selective=True)
                )
                buttons_id = None
                if question_id is not None:
                    buttons_id = await self._ask_part(_CANCEL_HINT, reply_to=question_id, markup=markup)
            else:
                question_id = buttons_id = await self._ask_part(
                    question + _ASK_HINT, reply_to=self._message_id, markup=markup
                )
            if question_id is None or buttons_id is None:
                return None
            answer = None
            with anyio.move_on_after(timeout):
                answer = await waiter.wait()
        await self._outbox.drop_buttons(self._chat_id, buttons_id)
        if answer is None:
            return None
        # Not through Deletions: nothing else will ask for this message, so nothing to remember.
        if secret and not await self._outbox.delete(self._chat_id, answer.message_id):
            await self.send(ANSWER_NOT_DELETED)
        return answer.text.strip()

    async def _ask_part(
        self, text: str, *, reply_to: int, markup: InlineKeyboardMarkup | ForceReply
    ) -> int | None:
        # Not kept across restarts: the question's waiter does not survive one either.
        return await self._outbox.send(
            self._chat_id,
            render(text, markdown=False, redact=self._redact),
            thread_id=self._thread_id,
            reply_to=reply_to,
            markup=markup,
            durable=False,
        )

    async def approval(self, approval: Approval) -> MessageRef | None:
        """The owner's decision on changed tools: in their private chat with the bot, else here.

        Text for now (the owner types the command); the chat itself only when the private chat
        cannot be reached, since a group's members need not read what a server changed.
        """
        text = render_approval(approval)
        return await self.send_private(text) or await self.send(text)

    async def notify(self, text: str) -> None:
        """In a group, tell every member: a message of its own, in a forum's General topic.

        A private chat's one person is the owner, who has the command's reply.
        """
        if self._group:
            await self._outbox.send(self._chat_id, render(text, markdown=False, redact=self._redact))

    async def question(self, question: Question, *, timeout: float = QUESTION_TIMEOUT) -> Answer:
        """Not yet asked in Telegram: the chat is told, and the server gets ``cancel`` at once."""
        await self.send(
            f"{question.asker} asked a question that this chat cannot answer yet; it was cancelled."
        )
        return Answer("cancel")

    async def progress(self, key: str, text: str) -> None:
        """One message per call, sent at its first progress and edited in place at most every 2 s.

        The caller passes the newest text each time this returns, so waiting here drops nothing.
        Not kept across restarts: the call it shows does not survive one either.
        """
        part = render(text, markdown=False, redact=self._redact)[0]
        shown = self._progress.get(key)
        if shown is None:
            shown = self._progress[key] = _ProgressMessage(None, anyio.current_time())
            shown.message_id = await self._outbox.send(
                self._chat_id, [part], thread_id=self._thread_id, durable=False
            )
            return
        if shown.message_id is None:
            return  # the first message was not delivered: nothing to edit
        await anyio.sleep(max(0.0, shown.edited + PROGRESS_EVERY - anyio.current_time()))
        shown.edited = anyio.current_time()
        await self._outbox.edit(self._chat_id, shown.message_id, part)

    async def delete(self, ref: MessageRef) -> bool:
        """Delete a message of this chat by its id; ``False`` when Telegram refuses."""
        if not isinstance(ref, int):
            return False
        return await self._deletions.delete(self._chat_id, ref)
