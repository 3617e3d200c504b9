"""Questions waiting for a person: what the dispatcher hands them before any chat's queue.

A question listens, by (chat, user), for that user's plain messages in that chat, for
``/cancel``, for its own buttons, and for the group's move to a supergroup. The chat's queue
is held by the very turn or command that asks, so these must never wait in it; nor may the
chat's commands wait behind it (``host.beside_a_question``): the dispatcher runs those that
only show something at once, and lets the others cancel the question (``cancel_for``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio

__all__ = ["AnswerMessage", "Heard", "Listener", "Moved", "PendingAnswers", "Pressed"]


@dataclass(frozen=True, slots=True)
class AnswerMessage:
    """A person's plain message that answers a question: its text, and where it is (so it can be deleted)."""

    text: str = field(repr=False)
    message_id: int
    chat_id: int
    """The chat it came from: after a group's upgrade, the supergroup's new id."""
    credential_shaped: bool = False
    """The inbound classifier's verdict: the text is nothing but a credential-shaped token."""


@dataclass(frozen=True, slots=True)
class Moved:
    """The group became a supergroup: the question now lives in ``chat_id``, where its old messages are not."""

    chat_id: int


@dataclass(frozen=True, slots=True)
class Pressed:
    """The asker pressed one of the question's buttons."""

    key: str


Heard = AnswerMessage | Moved | Pressed | None
"""What a question hears, in order: a message, the move, a button, or ``None``: cancelled."""


class Listener:
    """One question's ear. ``takes_text``: whether the asker's next plain message is for it.

    A plain message is taken once per ``takes_text``: the next one goes to the chat's queue
    unless the question asks again, so nothing sent after an answer is swallowed.
    """

    def __init__(self, *, takes_text: bool, owner_id: int | None = None) -> None:
        self.takes_text = takes_text
        self.owner_id = owner_id
        """The chat's owner when the question was asked, who may cancel it with a command."""
        self._send, self._receive = anyio.create_memory_object_stream[Heard](max_buffer_size=math.inf)
        self._open = True

    @property
    def open(self) -> bool:
        return self._open

    def hear(self, heard: Heard) -> bool:
        """Pass something on to the question; ``False`` when it does not take it."""
        if not self._open:
            return False
        if isinstance(heard, AnswerMessage):
            if not self.takes_text:
                return False
            self.takes_text = False
        self._send.send_nowait(heard)
        return True

    async def next(self) -> Heard:
        """What the question hears next, in the order it came."""
        return await self._receive.receive()

    def close(self) -> None:
        self._open = False
        self._send.close()
        self._receive.close()


class PendingAnswers:
    """The questions of the whole bot that wait for a person, by (chat, user).

    The update dispatcher offers each plain message here first, before any chat's queue. A
    command is never an answer (``/cancel`` ends the question).
    """

    def __init__(self) -> None:
        self._waiting: dict[tuple[int, int], Listener] = {}

    @contextmanager
    def listen(
        self, chat_id: int, user_id: int, *, takes_text: bool = True, owner_id: int | None = None
    ) -> Iterator[Listener]:
        """Listen for ``user_id`` in ``chat_id`` while the block runs; a newer question ends this one.

        ``owner_id``: the chat's owner, who may cancel the question with a command, as the asker may.
        """
        key = (chat_id, user_id)
        previous = self._waiting.get(key)
        if previous is not None:
            previous.hear(None)  # only the newest question gets the answer
        listener = self._waiting[key] = Listener(takes_text=takes_text, owner_id=owner_id)
        try:
            yield listener
        finally:
            # Wherever it lives now: a group's upgrade may have moved it.
            for where, known in list(self._waiting.items()):
                if known is listener:
                    del self._waiting[where]
            listener.close()

    def waiting(self, chat_id: int, user_id: int) -> Listener | None:
        """The question listening for ``user_id`` in ``chat_id``, if any."""
        listener = self._waiting.get((chat_id, user_id))
        return listener if listener is not None and listener.open else None

    def asked_in(self, chat_id: int) -> list[Listener]:
        """The questions that wait in ``chat_id``, whoever they are for."""
        return [
            listener for (where, _), listener in self._waiting.items() if where == chat_id and listener.open
        ]

    def owner_in(self, chat_id: int) -> int | None:
        """The chat's owner, as the questions waiting there know them; ``None`` when none does."""
        return next((known.owner_id for known in self.asked_in(chat_id) if known.owner_id is not None), None)

    def _cancellable(self, chat_id: int, user_id: int | None) -> list[Listener]:
        if user_id is None:
            return []  # an anonymous sender can be nobody's asker, nor the owner
        return [
            listener
            for (where, asker), listener in self._waiting.items()
            if where == chat_id and listener.open and user_id in (asker, listener.owner_id)
        ]

    def cancels(self, chat_id: int, user_id: int | None) -> bool:
        """Whether a command of ``user_id`` would cancel a question (see ``cancel_for``); changes nothing."""
        return bool(self._cancellable(chat_id, user_id))

    def cancel_for(self, chat_id: int, user_id: int | None) -> int:
        """A command of ``user_id`` cancels the questions it may: its own, and every one when it is the owner's.

        How many were cancelled.
        """
        return sum(listener.hear(None) for listener in self._cancellable(chat_id, user_id))

    def offer(self, chat_id: int, user_id: int, answer: AnswerMessage) -> bool:
        """Give a plain message to the question waiting for it; ``False`` when none takes it."""
        listener = self.waiting(chat_id, user_id)
        return listener is not None and listener.hear(answer)

    def cancel(self, chat_id: int, user_id: int) -> bool:
        """End the question waiting for ``user_id`` without an answer; ``False`` when none waits."""
        listener = self.waiting(chat_id, user_id)
        return listener is not None and listener.hear(None)

    def move(self, old_id: int, new_id: int) -> int:
        """A group became a supergroup: its questions now listen in the new chat, and are told; how many."""
        moved = 0
        for (chat_id, user_id), listener in list(self._waiting.items()):
            if chat_id != old_id:
                continue
            del self._waiting[(chat_id, user_id)]
            if (displaced := self._waiting.get((new_id, user_id))) is not None:
                displaced.hear(None)
            self._waiting[(new_id, user_id)] = listener
            listener.hear(Moved(new_id))
            moved += 1
        return moved
