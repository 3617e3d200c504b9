"""The console chat: the local user is the owner; secret answers are read without echo."""

from __future__ import annotations

import contextlib
import getpass
import itertools
import math
import re
import shutil
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel

from ..host import (
    QUESTION_TIMEOUT,
    Answer,
    Approval,
    ChatSession,
    Host,
    IncomingMessage,
    MessageRef,
    Question,
    Reply,
    Sender,
    answer_from_text,
    classify,
    normalize,
    render_approval,
    render_question,
)

__all__ = ["ConsoleUI", "printable", "run_console"]

_PROMPT = "you> "
# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides and
# isolates: what a server or the model could use to redraw the terminal or disguise text.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NOT_AN_ANSWER = "A command is not an answer: send the value, or /cancel."
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
        self._lines = _LineReader(self._input if interactive else self._readline)
        self._status: dict[str, str] = {}
        """The progress of the calls running now, by key: the status line shows the newest."""
        self._printed: dict[str, float] = {}

    async def send(self, text: str) -> MessageRef | None:
        # What servers and the model wrote reaches the terminal: ANSI sequences could clear the
        # screen and draw a fake "(hidden)" prompt.
        self._stdout.write(printable(text).rstrip("\n") + "\n")
        self._stdout.flush()
        return next(self._counter)

    private_place = "above, on a line of its own"
    """Where ``send_private`` shows text: the console has one person, its chat is private."""

    async def send_private(self, text: str) -> MessageRef | None:
        # The console has one person: its chat is private.
        return await self.send(text)

    async def ask(self, question: str, *, secret: bool = False, timeout: float = 300.0) -> str | None:
        self._answered = anyio.Event()
        if self.interactive:
            self._stdout.write("\r\x1b[K")
        try:
            return await self._ask(question, secret=secret, timeout=timeout)
        finally:
            self._answered.set()

    async def _ask(self, question: str, *, secret: bool, timeout: float) -> str | None:
        """The next line that is no command; ``None`` on /cancel, end of input or timeout.

        A command is never an answer: a ``/mcp_list`` typed while a key is asked for must not
        be saved as the key. ``/cancel`` ends the question.
        """
        reader: Callable[[], str | None]
        if self.interactive and secret:
            question = printable(question)

            def reader() -> str | None:
                return getpass.getpass(f"{question} (hidden) ", stream=self._stdout)
        else:
            await self.send(question)
            reader = self._readline
        with anyio.move_on_after(timeout):
            while True:
                answer = await _in_daemon_thread(reader)
                if answer is None:
                    return None
                answer = answer.strip()
                if not normalize(answer).startswith("/"):
                    return answer
                if normalize(answer).split()[0].lower() == "/cancel":
                    return None
                await self.send(_NOT_AN_ANSWER)
        return None

    async def question(self, question: Question, *, timeout: float = QUESTION_TIMEOUT) -> Answer:
        """Show a server's question and read answer lines until one is whole; cancel on timeout or end of input."""
        self._answered = anyio.Event()
        if self.interactive:
            self._stdout.write("\r\x1b[K")
        try:
            await self.send(render_question(question))
            with anyio.move_on_after(timeout):
                while (
                    line := await _in_daemon_thread(self._input if self.interactive else self._readline)
                ) is not None:
                    answer = answer_from_text(question, line)
                    if isinstance(answer, Answer):
                        return answer
                    await self.send(answer)
            return Answer("cancel")
        finally:
            self._answered.set()

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
        """The next message, or ``None`` at end of input.

        Cancelling the wait does not lose the line: the read goes on, and the next call gets it.
        """
        return await self._lines.next()

    def _readline(self) -> str | None:
        line = self._stdin.readline()
        return line.rstrip("\r\n") if line else None

    def _input(self) -> str | None:
        try:
            return input(_PROMPT)
        except EOFError:
            return None

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

    def __init__(self, read: Callable[[], str | None]) -> None:
        self._read = read
        self._pending: _Pending | None = None

    async def next(self) -> str | None:
        if self._pending is None:
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


async def _in_daemon_thread(read: Callable[[], str | None]) -> str | None:
    """Run a blocking read in a daemon thread.

    A thread blocked on the terminal cannot be interrupted; in the worker pool it would keep
    the process alive after Ctrl-C until the user pressed Enter. A daemon thread does not.
    """
    pending = _Pending.start(read)
    await pending.done.wait()
    return pending.result()


async def run_console(
    host: Host,
    *,
    scope_name: str = "default",
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    banner: str | None = None,
) -> None:
    """Chat in the console until end of input."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    ui = ConsoleUI(stdin, stdout, interactive=stdin.isatty() and stdout.isatty())
    user = getpass.getuser()
    session = await host.session(f"console:{scope_name}", owner=user)
    sender = Sender(id=user, name=user, is_owner=True)
    if banner and ui.interactive:
        await ui.send(banner)
    typed: deque[str | None] = deque()
    while (text := typed.popleft() if typed else await ui.read_message()) is not None:
        message = IncomingMessage(text=text, sender=sender, ref=None)
        async with ui.working():
            if classify(text, host.commands).command is None:
                reply = await _turn(host, session, message, ui, typed)
            else:
                # A command may ask a question, which reads the next line itself.
                reply = await host.handle(session, message, ui)
        if reply is not None:
            await ui.send(reply.text)


async def _turn(
    host: Host, session: ChatSession, message: IncomingMessage, ui: ConsoleUI, typed: deque[str | None]
) -> Reply | None:
    """Run an agent turn while reading on: ``/stop`` goes to the host at once, other lines wait
    their turn in ``typed`` (end of input too), in the order they came."""
    replies: list[Reply | None] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            replies.append(await host.handle(session, message, ui))
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        while True:
            line = await ui.read_message()
            command = None if line is None else classify(line, host.commands).command
            if line is not None and command is not None and command.name == "stop":
                stopped = await host.handle(session, IncomingMessage(line, message.sender, None), ui)
                if stopped is not None:
                    await ui.send(stopped.text)
                continue
            typed.append(line)
            if line is None:
                break
    return replies[0] if replies else None
