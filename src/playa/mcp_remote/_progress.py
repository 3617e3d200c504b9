"""A long call's progress, shown to the person whose turn made the call."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Final

import anyio

from ..core import UI
from .transport import Progress

__all__ = ["MAX_PROGRESS_TEXT", "ProgressFeed", "progress_text"]

logger = logging.getLogger(__name__)

MAX_PROGRESS_TEXT: Final = 200
"""Characters of a server's progress message shown; a status line is no place for a report."""

_keys = itertools.count(1)


def progress_text(tool: str, progress: Progress, redact: Callable[[str], str]) -> str:
    """One line: the tool, how far (``3/5``, or ``3``), and the server's message, redacted then cut."""
    parts: list[str] = []
    if progress.progress is not None:
        done = f"{progress.progress:g}"
        parts.append(f"{done}/{progress.total:g}" if progress.total is not None else done)
    if progress.message:
        message = " ".join(redact(progress.message).split())
        if len(message) > MAX_PROGRESS_TEXT:
            # Cut only once redacted: a cut first could keep the head of a credential.
            message = message[: MAX_PROGRESS_TEXT - 1] + "…"
        parts.append(message)
    return f"{tool}: {' — '.join(parts) or 'working'}"


class ProgressFeed:
    """One call's progress to one front end: the latest text only, one ``UI.progress`` at a time.

    A server may report a thousand times a second, and a front end may take seconds to show
    one (Telegram edits a message at most every 2 s): ``report`` only replaces the text, and
    ``run`` (a task of the chat's task group) shows the newest one each time the front end is
    ready. ``close`` shows the last text and ends ``run``.
    """

    def __init__(self, ui: UI, tool: str, redact: Callable[[str], str]) -> None:
        self.key = f"{tool}#{next(_keys)}"
        self._ui = ui
        self._tool = tool
        self._redact = redact
        self._latest: str | None = None
        self._shown: str | None = None
        self._changed = anyio.Event()
        self._closed = False

    async def report(self, progress: Progress) -> None:
        """The server's newest progress; shown when the front end is ready (never waits for it)."""
        if not self._closed:
            self._latest = progress_text(self._tool, progress, self._redact)
            self._changed.set()

    def close(self, final: str | None = None) -> None:
        """No more progress; ``final`` (already redacted) is the last text, if any was shown."""
        if final is not None and self._latest is not None:
            self._latest = f"{self._tool}: {final}"
        self._closed = True
        self._changed.set()

    async def run(self) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            text = self._latest
            if text is not None and text != self._shown:
                self._shown = text
                try:
                    await self._ui.progress(self.key, text)
                except Exception as exc:  # boundary: showing progress must never fail the call
                    logger.info("showing progress failed: %s", type(exc).__name__)
            if self._closed and not self._changed.is_set():
                return
