"""Questions waiting for an answer: the next plain message of one user in one chat is the answer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio

__all__ = ["Answer", "PendingAnswers", "Waiter"]


@dataclass(frozen=True, slots=True)
class Answer:
    """The text of an answer and the message that carried it (so it can be deleted)."""

    text: str = field(repr=False)
    message_id: int


@dataclass(eq=False)
class Waiter:
    """One question's wait for its answer; it ends with an answer, or with none (cancelled, replaced)."""

    thread_id: int | None = None
    answer: Answer | None = None
    done: anyio.Event = field(default_factory=anyio.Event)

    def settle(self, answer: Answer | None) -> None:
        if not self.done.is_set():
            self.answer = answer
            self.done.set()

    async def wait(self) -> Answer | None:
        await self.done.wait()
        return self.answer


class PendingAnswers:
    """The questions of the whole bot that wait for an answer, by (chat, user).

    The update dispatcher offers each plain message here first, before any chat's queue: the
    chat's queue is blocked by the very command that asked. A command is never offered.
    """

    def __init__(self) -> None:
        self._waiting: dict[tuple[int, int], Waiter] = {}

    @contextmanager
    def expect(self, chat_id: int, user_id: int, *, thread_id: int | None = None) -> Iterator[Waiter]:
        """Wait for the next message of ``user_id`` in ``chat_id`` while the block runs."""
        key = (chat_id, user_id)
        previous = self._waiting.get(key)
        if previous is not None:
            previous.settle(None)  # only the newest question gets the answer
        waiter = self._waiting[key] = Waiter(thread_id)
        try:
            yield waiter
        finally:
            if self._waiting.get(key) is waiter:
                del self._waiting[key]
            waiter.settle(None)

    def waiting(self, chat_id: int, user_id: int) -> Waiter | None:
        """The question waiting for ``user_id`` in ``chat_id``, if any."""
        waiter = self._waiting.get((chat_id, user_id))
        return None if waiter is None or waiter.done.is_set() else waiter

    def offer(self, chat_id: int, user_id: int, answer: Answer) -> bool:
        """Give a message to the question waiting for it; ``False`` when none waits."""
        waiter = self._waiting.pop((chat_id, user_id), None)
        if waiter is None or waiter.done.is_set():
            return False
        waiter.settle(answer)
        return True

    def cancel(self, chat_id: int, user_id: int) -> bool:
        """End the question waiting for ``user_id`` without an answer; ``False`` when none waits."""
        waiter = self._waiting.pop((chat_id, user_id), None)
        if waiter is None or waiter.done.is_set():
            return False
        waiter.settle(None)
        return True
