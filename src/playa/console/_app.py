"""The console chat: the local user is the owner; secret answers are read without echo."""

from __future__ import annotations

import getpass
import itertools
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TextIO

import anyio
import anyio.to_thread

from ..host import Host, IncomingMessage, MessageRef, Sender

__all__ = ["ConsoleUI", "run_console"]

_PROMPT = "you> "


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

    async def send(self, text: str) -> MessageRef | None:
        self._stdout.write(text.rstrip("\n") + "\n")
        self._stdout.flush()
        return next(self._counter)

    async def ask(self, question: str, *, secret: bool = False, timeout: float = 300.0) -> str | None:
        reader: Callable[[], str | None]
        if self.interactive and secret:

            def reader() -> str | None:
                return getpass.getpass(f"{question} (hidden) ", stream=self._stdout)
        else:
            await self.send(question)
            reader = self._readline
        with anyio.move_on_after(timeout):
            answer = await anyio.to_thread.run_sync(reader, abandon_on_cancel=True)
            return answer.strip() if answer is not None else None
        return None

    async def delete(self, ref: MessageRef) -> bool:
        # Nothing the console shows can be taken back; in a terminal the line is the user's own.
        return True

    async def read_message(self) -> str | None:
        """The next message, or ``None`` at end of input."""
        if self.interactive:
            return await anyio.to_thread.run_sync(self._input, abandon_on_cancel=True)
        return await anyio.to_thread.run_sync(self._readline, abandon_on_cancel=True)

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
                self._stdout.write("\r\x1b[K")
                self._stdout.flush()

    async def _spin(self) -> None:
        for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
            self._stdout.write(f"\r{frame} working…")
            self._stdout.flush()
            await anyio.sleep(0.1)


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
    while (text := await ui.read_message()) is not None:
        message = IncomingMessage(text=text, sender=sender, ref=None)
        async with ui.working():
            reply = await host.handle(session, message, ui)
        if reply is not None:
            await ui.send(reply.text)
