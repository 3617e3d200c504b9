"""A turn's reply written to the terminal as the model writes it.

Only the new end of each version is written: every version is the stream's gated text
(``ReplyStream.text``: redacted, a tail that could start a secret held back), and each one
starts with the one before, so what is on the screen is always the start of the reply. A
version that does not (two secrets merged into one ``[redacted]``) is not written; the reply
is then written whole once the turn ends. While a tool runs the line is ended, so the status
line has a line of its own; the text of the next response starts a new line.

In a pipe nothing streams: each message and reply stays one line, for scripts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO

import anyio

from ..agent import ReplyStream
from ._ui import ConsoleUI, printable

__all__ = ["ConsoleLive"]


class ConsoleLive:
    """One turn's reply in the terminal (``ReplyStream``'s front end)."""

    def __init__(self, ui: ConsoleUI, stdout: TextIO) -> None:
        self._ui = ui
        self._stdout = stdout
        self._stream: ReplyStream | None = None
        self._changed = anyio.Event()
        self._step = 0
        self._written = ""
        """The current response's text on the screen."""
        self._open = False
        """Whether the cursor is at the end of that text (the line is not ended)."""

    def changed(self, stream: ReplyStream) -> None:
        """The reply or its tools changed (``LiveReply``)."""
        self._stream = stream
        self._changed.set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ConsoleLive]:
        """Write the reply as it grows while the block (the turn) runs."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._run)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    async def _run(self) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            self._write()

    def _write(self) -> None:
        stream = self._stream
        if stream is None:
            return
        if stream.step != self._step:
            self._end_line()
            self._step, self._written = stream.step, ""
        if stream.running:
            self._end_line()  # the status line shows the tool
            return
        text = stream.text()
        if len(text) > len(self._written) and text.startswith(self._written):
            if not self._open:
                self._stdout.write("\r\x1b[K")  # over the status line
                self._open = self._ui.streaming = True
            self._stdout.write(printable(text[len(self._written) :]))
            self._stdout.flush()
            self._written = text

    def _end_line(self) -> None:
        if self._open:
            self._stdout.write("\n")
            self._stdout.flush()
            self._open = self._ui.streaming = False

    def finish(self, reply: str) -> bool:
        """End the reply's line; whether the reply is on the screen whole (else it is to be written)."""
        self._write()
        shown = self._open and reply.startswith(self._written)
        if shown:
            self._stdout.write(printable(reply[len(self._written) :]))
        self._end_line()
        return shown
