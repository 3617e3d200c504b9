"""The console's one reader of input, and where each line typed goes (``LineRouter``).

While a question waits, the lines go to it, and commands still run; otherwise each line is the
chat's next message, in the order typed.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.from_thread
import anyio.lowlevel

from ..core import (
    CommandRouter,
    beside_a_question,
    cancelled_for,
    classify,
)

__all__ = ["ANSWER_WORDS", "Beside", "LineRouter"]

_NOT_AN_ANSWER = "A command is not an answer: send the value, or /cancel."
ANSWER_WORDS: Final = ("accept", "decline", "cancel", "allow", "deny")
"""What answers a server's question or a call waiting for permission (``answer_from_text``);
``/cancel`` ends a secret question too."""


class _LineReader:
    """Reads lines one at a time in a daemon thread; a read outlives a cancelled wait for it.

    While a turn runs the console reads on, to catch ``/stop``; when the turn ends first, the
    read still waiting on the terminal must be the next message, not a line lost.
    """

    def __init__(
        self,
        read: Callable[[], str | None],
        prompt: Callable[[], None] | None = None,
        more: Callable[[], bool] | None = None,
    ) -> None:
        self._read = read
        self._prompt = prompt
        self._more = more
        self.followed = False
        """More input waited when the newest line was read: the line was part of a paste.

        Set by the reading thread right after each read, before the line is handed on: a line
        the thread holds and has not handed on yet waited when the line before it was read.
        """
        self._pending: _Pending | None = None

    def _read_one(self) -> str | None:
        line = self._read()
        if self._more is not None:
            self.followed = line is not None and self._more()
        return line

    @property
    def waiting(self) -> bool:
        """A read is under way."""
        return self._pending is not None

    @property
    def in_flight(self) -> bool:
        """A line was read that ``next`` has not handed on yet."""
        return self._pending is not None and bool(self._pending.outcome)

    async def next(self) -> str | None:
        if self._pending is None:
            if self._prompt is not None:
                self._prompt()
            self._pending = _Pending.start(self._read_one)
        pending = self._pending
        await pending.done.wait()
        self._pending = None
        return pending.result()


class _Pending:
    """One blocking read running in a daemon thread."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.outcome: list[str | BaseException | None] = []

    @classmethod
    def start(cls, read: Callable[[], str | None]) -> _Pending:
        pending = cls()
        token = anyio.lowlevel.current_token()

        def run() -> None:
            try:
                pending.outcome.append(read())
            except BaseException as exc:  # boundary: handed back to the waiting task
                pending.outcome.append(exc)
            with contextlib.suppress(RuntimeError):  # the event loop may be gone by now
                anyio.from_thread.run_sync(pending.done.set, token=token)

        threading.Thread(target=run, name="playa-console-input", daemon=True).start()
        return pending

    def result(self) -> str | None:
        result = self.outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result


@dataclass(frozen=True, slots=True)
class Beside:
    """The chat's commands, and how to run one now, beside the message being handled."""

    commands: CommandRouter
    run: Callable[[str], None]


class _Asked:
    """A question that waits: the lines the router gives it, in order, then ``None`` once it ended."""

    def __init__(self, *, server: bool) -> None:
        self.server = server
        """A server's question (answered with ``/accept``, ``/decline``, ``/cancel``), or a secret one."""
        self.ended = False
        self.raw = False
        """Every line is the answer's, commands too (the lines of a pasted key: ``_pem``)."""
        self._lines: deque[str] = deque()
        self._arrived = anyio.Event()
        self._ready = anyio.Event()
        """Set while it waits for a line, and once it ended."""

    def give(self, line: str) -> None:
        self._lines.append(line)
        self._ready = anyio.Event()
        self._arrived.set()

    def end(self) -> None:
        """No more lines for it: cancelled, or the input ended."""
        self.ended = True
        self._arrived.set()
        self._ready.set()

    async def next(self) -> str | None:
        """The next line given to it; ``None`` once it ended and every line given was taken."""
        while not self._lines and not self.ended:
            self._arrived = anyio.Event()
            self._ready.set()
            await self._arrived.wait()
        return self._lines.popleft() if self._lines else None

    async def ready(self) -> None:
        """Until it waits for a line, or ended: what it was given is taken, and it wants more."""
        await self._ready.wait()

    @property
    def holding(self) -> bool:
        """Lines were given to it that it has not taken yet."""
        return bool(self._lines)

    def untaken(self) -> list[str]:
        """The lines given to it that it did not take, when it ended: they are someone else's."""
        lines, self._lines = list(self._lines), deque()
        return lines


class LineRouter:
    """The console's one reader of input, and where each line typed goes.

    - While a question waits (``asking``), lines go to it; ``/help`` and the commands that only
      show something run at once beside it, and any other command cancels it with a note, then
      runs in its turn (``beside_a_question``).
    - While a message is handled, ``/stop`` runs at once; other lines wait their turn.
    - Otherwise each line is the next message, and the router reads no further until it is
      handled, as the user would have waited for its answer.

    In a pipe, lines are written ahead: a question takes the lines sent after the message that
    led to it, which waited meanwhile, as a script means them. In a terminal a question takes
    only what is typed once it shows: a line typed before is a message, as it was meant.
    """

    def __init__(
        self,
        read: Callable[[], str | None],
        *,
        prompt: Callable[[], None] | None,
        pipe: bool,
        say: Callable[[str], Awaitable[object]],
        more: Callable[[], bool] | None = None,
    ) -> None:
        """``more``: whether input waits to be read (a terminal's), for ``discard_burst``."""
        self._lines = _LineReader(read, self._prompting(prompt), more)
        self._pipe = pipe
        self._say = say
        self.beside: Beside | None = None
        self._unread: deque[str | None] = deque()
        """Lines read and not yet routed: a question's untaken lines, or held lines a new question takes."""
        self._held: deque[str | None] = deque()
        """The next messages, in order; ``None`` is the end of input."""
        self._asked: _Asked | None = None
        self._busy = False
        """A message was taken and is being handled."""
        self._eof = False
        self._pumping = False
        self._changed = anyio.Event()
        self._routing = False
        """A line is being routed (``_pump``)."""
        self._burst = False
        """Lines pasted with a secret answer are being discarded."""
        self._discarded = 0

    def _prompting(self, prompt: Callable[[], None] | None) -> Callable[[], None] | None:
        """``prompt``, but not for the lines of a pasted key or those pasted with a secret."""
        if prompt is None:
            return None

        def shown() -> None:
            if not self._burst and not (self._asked is not None and self._asked.raw):
                prompt()

        return shown

    def _poke(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    @property
    def reading(self) -> bool:
        """A read waits for the next line."""
        return self._lines.waiting

    async def message(self) -> str | None:
        """The next message: a line that waited, or the next typed; ``None`` at the end of input."""
        async with self.pumping():
            while not self._held:
                await self._changed.wait()
            line = self._held[0]
            if line is not None:  # the end of input stays, for every later call
                self._held.popleft()
                self._busy = True
            self._poke()
            return line

    def idle(self) -> None:
        """The message taken last is handled."""
        self._busy = False
        self._poke()

    @asynccontextmanager
    async def asking(self, *, server: bool) -> AsyncIterator[_Asked]:
        """A question waits while the block runs: the lines typed go to it (``_Asked.next``)."""
        asked = _Asked(server=server)
        if self._asked is not None:
            self._asked.end()  # only the newest question gets the answer
        self._asked = asked
        if self._pipe:
            self._unread.extendleft(reversed(self._held))
            self._held.clear()
        if self._eof and None not in self._unread:
            asked.end()
        self._poke()
        try:
            async with self.pumping():
                yield asked
        finally:
            if self._asked is asked:
                self._asked = None
            asked.end()
            self._unread.extendleft(reversed(asked.untaken()))
            self._poke()

    @asynccontextmanager
    async def pumping(self) -> AsyncIterator[None]:
        """Lines are read and routed while the block runs (unless they are already)."""
        if self._pumping:
            yield
            return
        self._pumping = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read)
                tg.start_soon(self._pump)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._pumping = False

    async def _read(self) -> None:
        """Read the lines typed, one at a time, as the router can take them."""
        while True:
            while self._unread or self._eof or (not self._busy and self._held and self._asked is None):
                await self._changed.wait()
            line = await self._lines.next()
            if line is None:
                self._eof = True
            self._unread.append(line)
            self._poke()

    async def _pump(self) -> None:
        """Route the lines read, in order."""
        while True:
            while not self._unread:
                await self._changed.wait()
            line = self._unread.popleft()
            self._poke()  # the reader may read on
            self._routing = True
            try:
                await self._route(line)
            finally:
                self._routing = False

    def discard_burst(self) -> None:
        """A secret answer was taken in a terminal: the lines that came with it in one paste go.

        Whatever was read and not yet routed, and whatever waited in the terminal when the
        newest line was read (``_LineReader.followed``), was pasted with the answer: a key pasted
        with its neighbours, or a multi-line secret, must not leave lines that become chat
        messages. They are discarded with a notice once no more waited; a line typed after that
        is a message again. No clock: a paste is what the terminal held at once.
        """
        self._discarded = 0
        self._burst = not self._quiet(routing=self._routing)

    def _quiet(self, *, routing: bool) -> bool:
        asked = self._asked
        return not (
            routing
            or any(line is not None for line in self._unread)
            or (asked is not None and asked.holding)
            or self._lines.in_flight
            or self._lines.followed
        )

    async def _discarded_one(self) -> None:
        self._discarded += 1
        if self._quiet(routing=False):
            count, self._burst, self._discarded = self._discarded, False, 0
            lines = "1 line" if count == 1 else f"{count} lines"
            await self._tell(f"{lines} pasted after the secret {'was' if count == 1 else 'were'} discarded.")

    def _hold(self, line: str | None) -> None:
        self._held.append(line)
        self._poke()

    async def _route(self, line: str | None) -> None:
        if (asked := self._asked) is not None and not asked.ended:
            # One line at a time: the line before may have answered it, and what comes after
            # an answer is not the question's.
            await asked.ready()
        if (asked := self._asked) is not None and not asked.ended:
            await self._to_question(asked, line)
            return
        if self._burst and line is not None:
            await self._discarded_one()
            return
        beside = self.beside
        if line is not None and self._busy and beside is not None:
            parsed = classify(line, beside.commands).command
            if parsed is not None and parsed.name == "stop":
                beside.run(line)  # for the message being handled: it cannot wait behind it
                return
        self._hold(line)

    async def _to_question(self, asked: _Asked, line: str | None) -> None:
        if line is None:
            asked.end()
            self._hold(None)
            return
        if asked.raw:
            asked.give(line)
            return
        beside = self.beside
        commands = beside.commands if beside is not None else CommandRouter()
        parsed = classify(line, commands).command
        if parsed is None:
            asked.give(line)  # the answer, or a try at one
            return
        if parsed.name in ANSWER_WORDS and commands.get(parsed.name) is None:
            if asked.server:
                asked.give(line)
            elif parsed.name == "cancel":
                asked.end()
            else:
                await self._tell(_NOT_AN_ANSWER)
            return
        if beside is None:
            await self._tell(_NOT_AN_ANSWER)
        elif beside_a_question(parsed, commands, is_owner=True):
            beside.run(line)
        else:
            asked.end()
            await self._tell(cancelled_for(parsed.name))
            if parsed.name == "stop" and self._busy:
                beside.run(line)
            else:
                self._hold(line)

    async def _tell(self, text: str) -> None:
        await self._say(text)
