"""The host's UI seam for one Telegram message: replies, secret questions and deletions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Final

import anyio
from telegram import ForceReply, InlineKeyboardButton, InlineKeyboardMarkup

from ..core import (
    ALWAYS,
    QUESTION_TIMEOUT,
    Answer,
    Approval,
    MessageRef,
    Panel,
    Question,
    check_link,
    render_approval,
)
from ._answers import AnswerMessage, Listener, Moved, Pressed
from ._buttons import Keyboard
from ._form import ACCEPT, CANCEL, DECLINE, Form, Prompt, url_text
from ._live import LiveMessage
from ._notices import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    ANSWER_NOT_DELETED,
    ASK_HINT,
    CANCEL_HINT,
    DENY,
    LOOK_IN_PRIVATE,
    MOVED_HINT,
    NO_PRIVATE_CHAT,
    OPEN_LINK,
    OWNER_UNREACHABLE,
    PERMISSION_OUTCOMES,
    REPLY_HINT,
    WAITS_FOR_OWNER,
)
from ._outbox import Delivery
from ._owner import CommandChat
from ._parts import BotParts
from ._render import one_part, render

__all__ = ["CANCEL", "PROGRESS_EVERY", "TelegramUI"]

PROGRESS_EVERY: Final = 2.0
"""Seconds between two edits of a call's progress message: Telegram limits edits, and a server may
report a thousand times a second."""


@dataclass(eq=False)
class _ProgressMessage:
    message_id: int | None
    edited: float
    """When it was sent or last edited (the event loop's clock)."""


_CLOSE_TIMEOUT: Final = 10.0
"""Seconds to take a question's buttons away once it ended."""


class TelegramUI:
    """What the host and its commands may do in the chat (and topic) a message came from."""

    def __init__(
        self,
        parts: BotParts,
        *,
        chat_id: int,
        thread_id: int | None,
        user_id: int | None,
        message_id: int | None,
        redact: Callable[[str], str],
        group: bool,
        owner_id: int | None = None,
        secret_deleted: Callable[[bool], None] | None = None,
    ) -> None:
        self._outbox, self._deletions, self._answers = parts.outbox, parts.deletions, parts.answers
        self._buttons, self._approvals, self._panels = parts.buttons, parts.approvals, parts.panels
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._user_id = user_id
        self._message_id: int | None = message_id
        self._redact = redact
        self._part = partial(one_part, redact=redact)
        self._group = group
        self._owner_id = owner_id
        """A group has members besides the owner: replies quote the message they answer, notices go out."""
        self._secret_deleted = secret_deleted
        """Told whether a secret answer of the sender's (or a key they sent as a form's value) was deleted."""
        self._progress: dict[str, _ProgressMessage] = {}
        self.live: LiveMessage | None = None
        """The turn's live message, which shows its calls' progress under the reply."""

    @property
    def thread_id(self) -> int | None:
        """The forum topic the message came from, which replies go to."""
        return self._thread_id

    async def send(self, text: str) -> MessageRef | None:
        """Send plain text to the chat, redacted; in groups it answers the message it is about."""
        return await self._outbox.deliver(await self.post(text, markdown=False))

    async def post(self, text: str, *, markdown: bool, answers: str | None = None) -> Delivery:
        """Queue a reply durably (redacted, formatted when ``markdown``); ``Outbox.deliver`` sends it.

        ``answers``: the inbox record of the message it answers."""
        return await self._outbox.post(
            self._chat_id,
            render(text, markdown=markdown, redact=self._redact),
            thread_id=self._thread_id,
            reply_to=self._message_id if self._group else None,
            answers=answers,
        )

    @property
    def private_place(self) -> str:
        """Where ``send_private`` shows text: this chat when it is the sender's private chat."""
        return "in our private chat" if self._group else "above"

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
        command is never an answer; the Cancel button or ``/cancel`` ends the question. When the
        group becomes a supergroup meanwhile, the question is asked again there.
        """
        user_id = self._user_id
        if user_id is None:
            return None  # an anonymous sender cannot be told apart from the chat's other admins
        answer = None
        with (
            self._answers.listen(self._chat_id, user_id, owner_id=self._owner_id) as listener,
            self._buttons.live(self._chat_id, user_id, lambda _: listener.hear(None)) as keyboard,
        ):
            buttons_id = await self._ask_parts(question, keyboard.markup([[(CANCEL, CANCEL)]]))
            if buttons_id is None:
                return None
            with anyio.move_on_after(timeout):
                while True:
                    heard = await listener.next()
                    if isinstance(heard, Moved):
                        await self._outbox.drop_buttons(self._chat_id, buttons_id)
                        keyboard.chat_id = self._moved(heard)
                        listener.takes_text = True
                        buttons_id = await self._ask_parts(
                            f"{MOVED_HINT}{question}", keyboard.markup([[(CANCEL, CANCEL)]])
                        )
                        if buttons_id is None:
                            return None
                        continue
                    if isinstance(heard, AnswerMessage):
                        answer = heard
                    break  # answered; or Cancel, /cancel, a newer question
        if buttons_id is not None:
            await self._outbox.drop_buttons(self._chat_id, buttons_id)
        if answer is None:
            return None
        # Not through Deletions: nothing else will ask for this message, so nothing to remember.
        if secret:
            deleted = await self._outbox.delete(answer.chat_id, answer.message_id)
            self._deleted(deleted)
            if not deleted:
                await self.send(ANSWER_NOT_DELETED)
        return answer.text.strip()

    def _deleted(self, deleted: bool) -> None:
        if self._secret_deleted is not None:
            self._secret_deleted(deleted)

    def _moved(self, moved: Moved) -> int:
        """The group became a supergroup: what this message's turn still says goes there.

        The old group's messages are not the new chat's, so nothing there is replied to.
        """
        self._chat_id, self._thread_id, self._message_id = moved.chat_id, None, None
        return moved.chat_id

    async def _ask_parts(self, question: str, markup: InlineKeyboardMarkup) -> int | None:
        """Show a question whose answer is the asker's next message; the id of the message with ``markup``."""
        if not self._group:
            return await self._ask_part(question + ASK_HINT, reply_to=self._message_id, markup=markup)
        # With privacy mode on (a group's default) the bot sees a member's plain message only
        # when it replies to one of the bot's: ForceReply opens that reply on the asker's client
        # (``selective``: the question replies to their message, so only theirs; after a move
        # there is no message of theirs to reply to, so everyone's). A message carries one
        # markup, so the buttons come in a second message.
        force = ForceReply(selective=self._message_id is not None)
        question_id = await self._ask_part(question + REPLY_HINT, reply_to=self._message_id, markup=force)
        if question_id is None:
            return None
        return await self._ask_part(CANCEL_HINT, reply_to=question_id, markup=markup)

    async def _ask_part(
        self, text: str, *, reply_to: int | None, markup: InlineKeyboardMarkup | ForceReply
    ) -> int | None:
        # Not kept across restarts: the question's listener does not survive one either.
        return await self._outbox.send(
            self._chat_id,
            render(text, markdown=False, redact=self._redact),
            thread_id=self._thread_id,
            reply_to=reply_to,
            markup=markup,
            durable=False,
        )

    async def approval(self, approval: Approval) -> MessageRef | None:
        """The owner's decision on changed tools, with Approve and Reject buttons only the owner can press.

        In the owner's private chat with the bot; the chat itself only when that cannot be
        reached, since a group's members need not read what a server changed. A press runs the
        command as the owner typing it here would (``TelegramBot``); the turn never waits for it.
        """
        if self._owner_id is None:
            # Nobody can be told apart as the owner, so no button could be honoured: the text
            # says which command to type.
            return await self.send(render_approval(approval))
        chat = CommandChat(self._chat_id, self._thread_id, self._group, self._owner_id)
        return await self._approvals.show(approval, self._redact, chat)

    async def panel(self, panel: Panel) -> MessageRef | None:
        """The servers' panel, with the owner's buttons, in their private chat only (``PanelMessages``)."""
        if self._owner_id is None:
            return None  # nobody can be told apart as the owner: no button could be honoured
        chat = CommandChat(self._chat_id, self._thread_id, self._group, self._owner_id)
        return await self._panels.show(panel, self._redact, chat)

    async def notify(self, text: str) -> None:
        """In a group, tell every member: a message of its own, in a forum's General topic.

        A private chat's one person is the owner, who has the command's reply.
        """
        if self._group:
            await self._outbox.send(self._chat_id, render(text, markdown=False, redact=self._redact))

    async def question(self, question: Question, *, timeout: float = QUESTION_TIMEOUT) -> Answer:
        """Ask the sender a server's question with buttons; only they can answer, within ``timeout``.

        A form is one message, edited as it is filled in (``Form``); a link goes to the sender's
        private chat. Unanswered in time, cancelled (``/stop``), or replaced by a newer question,
        the answer is ``cancel``, and the message says so, without its buttons. A call waiting for
        permission goes to the owner instead, whoever sent the message (``_permission_question``).
        """
        if question.permission:
            return await self._permission_question(question, timeout)
        if self._user_id is None:
            await self.send(
                f"{question.asker} asked a question, which only the person who wrote can answer; "
                "an anonymous sender cannot be told apart, so it was cancelled."
            )
            return Answer("cancel")
        if question.url is not None:
            return await self._link_question(question, self._user_id, timeout)
        return await self._form_question(Form(question), self._user_id, timeout)

    async def _form_question(self, form: Form, user_id: int, timeout: float) -> Answer:
        answer: Answer | None = None
        shown_id: int | None = None
        waited: anyio.CancelScope | None = None
        with self._asking(user_id, buttons_in=self._chat_id) as (listener, keyboard):
            try:
                shown_id = await self._show(form.text(), self._markup(keyboard, form.rows()))
                if shown_id is None:
                    return Answer("cancel")
                prompt: Prompt | None = None
                accepting = False
                with anyio.move_on_after(timeout) as waited:
                    while True:
                        heard = await listener.next()
                        if heard is None:  # /cancel, or a newer question
                            answer = Answer("cancel")
                            break
                        if isinstance(heard, Moved):
                            await self._outbox.drop_buttons(self._chat_id, shown_id)
                            keyboard.chat_id = self._moved(heard)
                            shown_id = await self._show(
                                MOVED_HINT + form.text(), self._markup(keyboard, form.rows())
                            )
                            if shown_id is None:
                                answer = Answer("cancel")
                                break
                            if prompt is not None:
                                await self._prompt(prompt, listener)
                            continue
                        if isinstance(heard, AnswerMessage):
                            if prompt is None:
                                continue
                            if heard.credential_shaped:
                                prompt = await self._refuse_key(heard, prompt)
                            else:
                                prompt = form.reply(prompt, heard.text)
                            if prompt is not None:
                                await self._prompt(prompt, listener)
                                continue
                            if accepting:
                                heard = Pressed("accept")  # the required value Accept asked for came
                        if isinstance(heard, Pressed):
                            accepting = heard.key == "accept"
                            outcome = form.press(heard.key)
                            if isinstance(outcome, Answer):
                                answer = outcome
                                break
                            prompt = outcome
                            listener.takes_text = False
                            if prompt is not None:
                                await self._prompt(prompt, listener)
                        await self._outbox.edit(
                            self._chat_id,
                            shown_id,
                            self._part(form.text()),
                            markup=self._markup(keyboard, form.rows()),
                        )
            finally:
                if shown_id is not None:
                    timed_out = answer is None and waited is not None and waited.cancelled_caught
                    outcome_text = form.outcome(answer or Answer("cancel"), timed_out=timed_out)
                    # Shielded and bounded: a turn that ends (timeout, /stop) still takes the buttons away.
                    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT):
                        await self._outbox.edit(self._chat_id, shown_id, self._part(form.text(outcome_text)))
        return answer or Answer("cancel")

    @contextmanager
    def _asking(self, user_id: int, *, buttons_in: int) -> Iterator[tuple[Listener, Keyboard]]:
        """A question to ``user_id`` asked in this chat, its buttons in ``buttons_in``: what it hears."""
        with (
            self._answers.listen(
                self._chat_id, user_id, takes_text=False, owner_id=self._owner_id
            ) as listener,
            self._buttons.live(buttons_in, user_id, lambda key: listener.hear(Pressed(key))) as keyboard,
        ):
            yield listener, keyboard

    def _markup(self, keyboard: Keyboard, rows: list[list[tuple[str, str]]]) -> InlineKeyboardMarkup:
        """Buttons whose labels are redacted like every text: they show the person's values too."""
        return keyboard.markup([[(self._redact(label), key) for label, key in row] for row in rows])

    async def _show(self, text: str, markup: InlineKeyboardMarkup) -> int | None:
        """Send a question as one message with its buttons, in reply to the asker's message."""
        return await self._outbox.send(
            self._chat_id,
            [self._part(text)],
            thread_id=self._thread_id,
            reply_to=self._message_id,
            markup=markup,
            durable=False,
        )

    async def _prompt(self, prompt: Prompt, listener: Listener) -> None:
        """Ask for one field with a forced reply: the asker's next plain message here is its value."""
        listener.takes_text = True
        await self._ask_part(
            prompt.text, reply_to=self._message_id, markup=ForceReply(selective=self._message_id is not None)
        )

    async def _refuse_key(self, heard: AnswerMessage, prompt: Prompt) -> Prompt:
        """A key is never a form's value: the protocol keeps secrets out of forms. The message is deleted."""
        deleted = await self._deletions.delete(heard.chat_id, heard.message_id)
        self._deletions.forget(heard.chat_id, heard.message_id)
        self._deleted(deleted)
        kept = "" if deleted else " I could not delete it: delete it yourself, and rotate the key."
        return Prompt(prompt.field, f"That looks like a key, and a form never takes one.{kept}")

    async def _link_question(self, question: Question, user_id: int, timeout: float) -> Answer:
        """A link: to the asker alone, in their private chat with the bot, with the three answers under it."""
        text = url_text(question)
        answer: Answer | None = None
        waited: anyio.CancelScope | None = None
        with self._asking(user_id, buttons_in=user_id) as (listener, keyboard):
            markup = keyboard.markup([[(ACCEPT, "accept"), (DECLINE, "decline"), (CANCEL, "cancel")]])
            # Not journaled: the question does not outlive a restart.
            shown_id = None
            if check_link(question.url or "").web:
                # Sent to the asker's private chat only; Telegram asks before it opens the link.
                opener = InlineKeyboardButton(OPEN_LINK, url=question.url)
                with_opener = InlineKeyboardMarkup([[opener], *markup.inline_keyboard])
                shown_id = await self._outbox.send(
                    user_id, [self._part(text)], markup=with_opener, durable=False
                )
            if shown_id is None:
                # No web link, or one Telegram refuses in a button (a loopback address): the text has it.
                shown_id = await self._outbox.send(user_id, [self._part(text)], markup=markup, durable=False)
            if shown_id is None:
                if self._group:
                    await self.send(NO_PRIVATE_CHAT.format(asker=question.asker))
                return Answer("cancel")
            try:
                if self._group:
                    await self.send(LOOK_IN_PRIVATE.format(asker=question.asker))
                with anyio.move_on_after(timeout) as waited:
                    while True:
                        heard = await listener.next()
                        if heard is None:
                            answer = Answer("cancel")
                            break
                        if isinstance(heard, Moved):
                            self._moved(heard)  # the link stays where it is: the private chat
                        elif isinstance(heard, Pressed):
                            outcome = Form(question).press(heard.key)
                            if isinstance(outcome, Answer):
                                answer = outcome
                                break
            finally:
                timed_out = answer is None and waited is not None and waited.cancelled_caught
                outcome_text = Form.outcome(answer or Answer("cancel"), timed_out=timed_out)
                with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT):
                    await self._outbox.edit(user_id, shown_id, self._part(f"{text}\n\n{outcome_text}"))
        return answer or Answer("cancel")

    async def _permission_question(self, question: Question, timeout: float) -> Answer:
        """A call that waits for the owner: in the owner's private chat, whoever's turn made it, with
        the whole text (over several messages if it must) and Allow once, Always for this tool and
        Deny under it. Only the owner's press counts; a member's is told the buttons are not theirs."""
        owner_id = self._owner_id
        if owner_id is None:
            # Nobody can be told apart as the owner: nobody may allow it.
            await self.send(OWNER_UNREACHABLE)
            return Answer("cancel")
        parts = render(question.text, markdown=False, redact=self._redact)
        answer: Answer | None = None
        key: str | None = None
        # Known to wait in this chat: its commands that only show run beside it, and the owner's
        # others (or /cancel) end it rather than wait out the ask timeout behind it.
        with self._asking(owner_id, buttons_in=owner_id) as (listener, keyboard):
            markup = keyboard.markup([[(ALLOW_ONCE, "allow"), (ALLOW_ALWAYS, "always")], [(DENY, "deny")]])
            # Not journaled: the call does not outlive a restart.
            shown_id = await self._outbox.send(owner_id, parts, markup=markup, durable=False)
            if shown_id is None:
                if self._group:
                    await self.send(OWNER_UNREACHABLE)
                return Answer("cancel")
            try:
                if self._group:
                    await self.send(WAITS_FOR_OWNER)
                with anyio.move_on_after(timeout):
                    while answer is None:
                        heard = await listener.next()
                        if heard is None:
                            break
                        if isinstance(heard, Pressed) and heard.key in PERMISSION_OUTCOMES:
                            key = heard.key
                            answer = (
                                Answer("decline")
                                if key == "deny"
                                else Answer("accept", {ALWAYS: True} if key == "always" else {})
                            )
            finally:
                listener.close()
                # Unanswered in time, or the turn ended (/stop): either way no answer came.
                outcome = (
                    PERMISSION_OUTCOMES[key] if key is not None else "No answer came: the call was not made."
                )
                with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT):
                    await self._outbox.edit(owner_id, shown_id, self._part(f"{parts[-1].text}\n\n{outcome}"))
        return answer or Answer("cancel")

    async def progress(self, key: str, text: str) -> None:
        """One message per call, sent at its first progress and edited in place at most every 2 s.

        The caller passes the newest text each time this returns, so waiting here drops nothing.
        Not kept across restarts: the call it shows does not survive one either.
        """
        if self.live is not None and self.live.active:
            self.live.progress(key, self._redact(text))
            return
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
