"""The console's front end for the host: what it shows in the terminal or a pipe, and how it asks.

The local user is the owner; secret answers are read without echo. Lines typed go through one
router (``_input``).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import re
import select
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Final, TextIO

import anyio
import anyio.lowlevel

from ..core import (
    QUESTION_TIMEOUT,
    Answer,
    Approval,
    CommandRouter,
    MessageRef,
    Panel,
    Question,
    answer_from_text,
    check_link,
    render_approval,
    render_panel,
    render_question,
)
from ._input import Beside, LineRouter
from ._pem import whole_answer

if sys.platform != "win32":
    import termios

__all__ = ["ConsoleUI", "printable"]

_PROMPT = "you> "
# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides and
# isolates: what a server or the model could use to redraw the terminal or disguise text.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_BOLD: Final = "\x1b[1m"
_PLAIN: Final = "\x1b[0m"
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
        self._router = LineRouter(
            self._readline,
            prompt=self._prompt if interactive else None,
            pipe=not interactive,
            say=self.send,
            more=self._more_typed if interactive else None,
        )
        self._status: dict[str, str] = {}
        """The progress of the calls running now, by key: the status line shows the newest."""
        self._printed: dict[str, float] = {}
        self.streaming = False
        """A reply is being written on the current line: the status line waits for it to end."""

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

        A secret answer that begins a PEM block is read up to the block's END line (``_pem``); in a
        terminal, the lines pasted with a secret answer are discarded (``discard_burst``). A command is never an answer: a ``/mcp_list`` typed while a key is asked for must not be
        saved as the key (it runs beside the question; see ``LineRouter``). In a terminal a secret
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
                        if answer is None:
                            return None
                        whole = (
                            await whole_answer(asked, answer.strip(), self.send) if secret else answer.strip()
                        )
                        if hidden:
                            # Before the question ends: a line pasted with the answer is never
                            # routed as a message meanwhile.
                            self._router.discard_burst()
                        return whole
                    return None
        finally:
            if hidden:
                self._stdout.write("\n")  # the Enter typed was not echoed either
                self._stdout.flush()
            self._answered.set()

    def _more_typed(self) -> bool:
        """The terminal holds input not read yet (a line, in its canonical mode)."""
        try:
            ready, _, _ = select.select([self._stdin], [], [], 0)
        except (OSError, ValueError):
            return False
        return bool(ready)

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

    async def panel(self, panel: Panel) -> MessageRef | None:
        # The console's one person is the owner: the text form, each action a command to type.
        return await self.send(render_panel(panel))

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
        self._router.beside = Beside(commands, run)

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
            if self.streaming:
                await anyio.sleep(0.1)
                continue
            status = next(reversed(self._status.values()), "working…")
            width = max(10, shutil.get_terminal_size().columns - 3)
            status = status if len(status) <= width else status[: width - 1] + "…"
            self._stdout.write(f"\r\x1b[K{frame} {status}")
            self._stdout.flush()
            await anyio.sleep(0.1)
