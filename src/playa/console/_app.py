"""The console chat: the local user is the owner; secret answers are read without echo.

One router reads every line typed (``_Router``): while a question waits, the lines go to it,
and commands still run; otherwise each line is the chat's next message, in the order typed.
"""

from __future__ import annotations

import contextlib
import getpass
import io
import itertools
import math
import re
import shutil
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final, TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel

from ..agent import Host
from ..core import (
    NOTHING_TO_ANSWER,
    NOTHING_TO_CANCEL,
    QUESTION_TIMEOUT,
    Answer,
    Approval,
    CommandRouter,
    IncomingMessage,
    MessageRef,
    Question,
    Sender,
    answer_from_text,
    beside_a_question,
    cancelled_for,
    check_link,
    classify,
    render_approval,
    render_question,
)

if sys.platform != "win32":
    import termios

__all__ = ["ConsoleUI", "printable", "run_console"]

_PROMPT = "you> "
# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides and
# isolates: what a server or the model could use to redraw the terminal or disguise text.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_BOLD: Final = "\x1b[1m"
_PLAIN: Final = "\x1b[0m"
_NOT_AN_ANSWER = "A command is not an answer: send the value, or /cancel."
_ANSWER_WORDS: Final = ("accept", "decline", "cancel", "allow", "deny")
"""What answers a server's question or a call waiting for permission (``answer_from_text``);
``/cancel`` ends a secret question too."""
_PIPE_PROGRESS_EVERY = 1.0
"""Seconds between two progress lines of one call in a pipe, where no status line can be redrawn."""


def printable(text: str) -> str:
    """``text`` safe to write to a terminal: no escape sequences, no control characters."""
    return _CONTROLS.sub("", text)


class ConsoleUI:
    """The UI seam over a terminal or a pipe.

    In a pipe (stdin not a terminal) every message and every answer to a question is one line,
    so scripts and tests can drive a whole chat, secret questions included.
    """

    def __init__(self, stdin: TextIO, stdout: TextIO, *, interactive: bool) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self.interactive = interactive
        self._counter = itertools.count(1)
        self._answered = anyio.Event()
        self._answered.set()
        """Unset while a question waits for its answer: the status line stays off the prompt."""
        self._router = _Router(
            self._readline, prompt=self._prompt if interactive else None, pipe=not interactive, say=self.send
        )
        self._status: dict[str, str] = {}
        """The progress of the calls running now, by key: the status line shows the newest."""
        self._printed: dict[str, float] = {}

    async def send(self, text: str) -> MessageRef | None:
        # What servers and the model wrote reaches the terminal: ANSI sequences could clear the
        # screen and draw a fake "(hidden)" prompt. In a terminal, it replaces the prompt or the
        # status line it may be written over.
        clear = "\r\x1b[K" if self.interactive else ""
        self._stdout.write(clear + printable(text).rstrip("\n") + "\n")
        self._stdout.flush()
        return next(self._counter)

    private_place = "above, on a line of its own"
    """Where ``send_private`` shows text: the console has one person, its chat is private."""

    async def send_private(self, text: str) -> MessageRef | None:
        # The console has one person: its chat is private.
        return await self.send(text)

    async def ask(self, question: str, *, secret: bool = False, timeout: float = 300.0) -> str | None:
        """The next plain line typed; ``None`` on /cancel, on another command, at end of input or on timeout.

        A command is never an answer: a ``/mcp_list`` typed while a key is asked for must not be
        saved as the key (it runs beside the question; see ``_Router``). In a terminal a secret
        answer is not echoed.
        """
        hidden = self.interactive and secret
        self._answered = anyio.Event()
        if self.interactive:
            self._stdout.write("\r\x1b[K")
        try:
            # The echo goes off before the question shows: whatever is typed once it shows is unseen.
            with self._unechoed() if hidden else contextlib.nullcontext():
                async with self._router.asking(server=False) as asked:
                    if hidden:
                        self._stdout.write(f"{printable(question)} (hidden) ")
                        self._stdout.flush()
                    else:
                        await self.send(question)
                    with anyio.move_on_after(timeout):
                        answer = await asked.next()
                        return None if answer is None else answer.strip()
                    return None
        finally:
            if hidden:
                self._stdout.write("\n")  # the Enter typed was not echoed either
                self._stdout.flush()
            self._answered.set()

    @contextlib.contextmanager
    def _unechoed(self) -> Iterator[None]:
        """What is typed while the block runs is not shown, as ``getpass`` does it, on the terminal itself.

        The router's read may already wait on the terminal, so the echo is turned off beneath it.
        """
        if sys.platform == "win32":
            yield
            return
        try:
            fd = self._stdin.fileno()
            before = termios.tcgetattr(fd)
        except (OSError, ValueError, io.UnsupportedOperation, termios.error):
            yield
            return
        quiet = list(before)
        quiet[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        try:
            yield
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, before)

    async def question(self, question: Question, *, timeout: float = QUESTION_TIMEOUT) -> Answer:
        """Show a server's question and take answer lines until one is whole; cancel on timeout or end of input."""
        self._answered = anyio.Event()
        if self.interactive:
            self._stdout.write("\r\x1b[K")
        try:
            async with self._router.asking(server=True) as asked:
                await self._show_question(question)
                with anyio.move_on_after(timeout):
                    while (line := await asked.next()) is not None:
                        answer = answer_from_text(question, line)
                        if isinstance(answer, Answer):
                            return answer
                        await self.send(answer)
            return Answer("cancel")
        finally:
            self._answered.set()

    async def _show_question(self, question: Question) -> None:
        """The question as ``send`` shows it; in a terminal, a link's domain line in bold."""
        if not self.interactive or question.url is None:
            await self.send(render_question(question))
            return
        domain = printable(check_link(question.url).domain_line)
        text = printable(render_question(question)).replace(
            f"\n{domain}\n", f"\n{_BOLD}{domain}{_PLAIN}\n", 1
        )
        self._stdout.write("\r\x1b[K" + text.rstrip("\n") + "\n")
        self._stdout.flush()

    async def progress(self, key: str, text: str) -> None:
        """In a terminal, the status line under the turn shows it; in a pipe, a line at most every second."""
        if self.interactive:
            self._status.pop(key, None)
            self._status[key] = printable(text)
            return
        now = anyio.current_time()
        if now - self._printed.get(key, -math.inf) >= _PIPE_PROGRESS_EVERY:
            self._printed[key] = now
            await self.send(f"… {text}")

    async def approval(self, approval: Approval) -> MessageRef | None:
        # The console's one person is the owner: the text form, answered with a typed command.
        return await self.send(render_approval(approval))

    async def delete(self, ref: MessageRef) -> bool:
        # Nothing the console shows can be taken back; in a terminal the line is the user's own.
        return True

    async def notify(self, text: str) -> None:
        # The console's one person is the owner, who just read the command's reply.
        return None

    async def read_message(self) -> str | None:
        """The next message, or ``None`` at end of input; ``done_with_message`` once it is handled.

        Cancelling the wait does not lose the line: the read goes on, and the next call gets it.
        """
        return await self._router.message()

    def done_with_message(self) -> None:
        """The message ``read_message`` gave is handled: the next line typed is the next message."""
        self._router.idle()

    def beside(self, commands: CommandRouter, run: Callable[[str], None]) -> None:
        """Let commands typed while a question waits or a message is handled run now, with ``run``.

        Without it (a console UI on its own), a command typed while a question waits is no answer,
        and nothing else happens to it.
        """
        self._router.beside = _Beside(commands, run)

    def _readline(self) -> str | None:
        line = self._stdin.readline()
        return line.rstrip("\r\n") if line else None

    def _prompt(self) -> None:
        # Written here, not by input() in the reading thread: a question shown meanwhile must
        # not get a prompt written after it. A secret question turns the echo off beneath the
        # read already waiting (``_unechoed``).
        self._stdout.write(_PROMPT)
        self._stdout.flush()

    def prompt_again(self) -> None:
        """In a terminal, show the prompt again when a read waits (the status line wiped it)."""
        if self.interactive and self._router.reading:
            self._prompt()

    @asynccontextmanager
    async def working(self) -> AsyncIterator[None]:
        """A status line while a turn runs (terminals only)."""
        if not self.interactive:
            yield
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._spin)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                self._status.clear()
                self._stdout.write("\r\x1b[K")
                self._stdout.flush()

    async def _spin(self) -> None:
        for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
            await self._answered.wait()
            await anyio.lowlevel.checkpoint_if_cancelled()  # the turn may have ended meanwhile
            status = next(reversed(self._status.values()), "working…")
            width = max(10, shutil.get_terminal_size().columns - 3)
            status = status if len(status) <= width else status[: width - 1] + "…"
            self._stdout.write(f"\r\x1b[K{frame} {status}")
            self._stdout.flush()
            await anyio.sleep(0.1)


class _LineReader:
    """Reads lines one at a time in a daemon thread; a read outlives a cancelled wait for it.

    While a turn runs the console reads on, to catch ``/stop``; when the turn ends first, the
    read still waiting on the terminal must be the next message, not a line lost.
    """

    def __init__(self, read: Callable[[], str | None], prompt: Callable[[], None] | None = None) -> None:
        self._read = read
        self._prompt = prompt
        self._pending: _Pending | None = None

    @property
    def waiting(self) -> bool:
        """A read is under way."""
        return self._pending is not None

    async def next(self) -> str | None:
        if self._pending is None:
            if self._prompt is not None:
                self._prompt()
            self._pending = _Pending.start(self._read)
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
class _Beside:
    """The chat's commands, and how to run one now, beside the message being handled."""

    commands: CommandRouter
    run: Callable[[str], None]


class _Asked:
    """A question that waits: the lines the router gives it, in order, then ``None`` once it ended."""

    def __init__(self, *, server: bool) -> None:
        self.server = server
        """A server's question (answered with ``/accept``, ``/decline``, ``/cancel``), or a secret one."""
        self.ended = False
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

    def untaken(self) -> list[str]:
        """The lines given to it that it did not take, when it ended: they are someone else's."""
        lines, self._lines = list(self._lines), deque()
        return lines


class _Router:
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
    ) -> None:
        self._lines = _LineReader(read, prompt)
        self._pipe = pipe
        self._say = say
        self.beside: _Beside | None = None
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
            await self._route(line)

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
        beside = self.beside
        commands = beside.commands if beside is not None else CommandRouter()
        parsed = classify(line, commands).command
        if parsed is None:
            asked.give(line)  # the answer, or a try at one
            return
        if parsed.name in _ANSWER_WORDS and commands.get(parsed.name) is None:
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


async def run_console(
    host: Host,
    *,
    scope_name: str = "default",
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    banner: str | None = None,
) -> None:
    """Chat in the console until end of input.

    Messages are handled one at a time, in the order typed. Meanwhile ``/stop`` runs at once,
    and while a question waits, the lines typed go to it and commands still run (``_Router``).
    """
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    ui = ConsoleUI(stdin, stdout, interactive=stdin.isatty() and stdout.isatty())
    user = getpass.getuser()
    session = await host.session(f"console:{scope_name}", owner=user)
    sender = Sender(id=user, name=user, is_owner=True)
    if banner and ui.interactive:
        await ui.send(banner)

    async def now(line: str) -> None:
        reply = await host.handle(session, IncomingMessage(line, sender, None), ui)
        if reply is not None:
            await ui.send(reply.text)

    async with anyio.create_task_group() as tg:

        def run_now(line: str) -> None:
            tg.start_soon(now, line)

        ui.beside(host.commands, run_now)
        async with ui._router.pumping():
            while (text := await ui.read_message()) is not None:
                parsed = classify(text, host.commands).command
                try:
                    if (
                        parsed is not None
                        and parsed.name in _ANSWER_WORDS
                        and host.commands.get(parsed.name) is None
                    ):
                        await ui.send(NOTHING_TO_CANCEL if parsed.name == "cancel" else NOTHING_TO_ANSWER)
                        continue
                    async with ui.working():
                        reply = await host.handle(session, IncomingMessage(text, sender, None), ui)
                finally:
                    ui.done_with_message()
                if reply is not None:
                    await ui.send(reply.text)
                ui.prompt_again()
