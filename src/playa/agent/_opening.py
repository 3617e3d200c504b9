"""A chat's blocking file work when its session opens: one worker-thread hop, a few chats' at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio
from pydantic_ai.messages import ModelMessage

from ..core import ChatSession, Extension
from ._history import History, read_file

__all__ = ["OPEN_THREADS", "OpenStep", "SessionFiles"]

OPEN_THREADS = 4
"""Chats whose open does its file work at once. A restarted bot meets every chat at once; each
hop is short and mostly CPU (a history parsed, seals opened), so more threads than this only
contend for the GIL with one another and with the event loop, each hop taking longer. The default
limiter's threads stay for the work that waits (a DNS lookup, an fsync)."""


@dataclass(eq=False)
class OpenStep:
    """An extension's blocking step of a session's open (``Extension.session_opening``)."""

    extension: Extension
    run: Callable[[], None]
    failure: Exception | None = None
    """What the step raised, kept for the host to log on the event loop (where the chat's
    redactor is): a worker thread must not build it."""

    def __call__(self) -> None:
        try:
            self.run()
        except Exception as exc:  # boundary: an extension's failure is logged and contained
            self.failure = exc


class SessionFiles:
    """Runs each opening chat's file work in one worker-thread hop: its workspace folder, its
    history and the extensions' steps, rather than a hop each, every one queued for the GIL
    behind the others' during a storm of opens."""

    def __init__(self) -> None:
        self._limiter: anyio.CapacityLimiter | None = None

    async def open(self, session: ChatSession, steps: Sequence[OpenStep]) -> History:
        """Make the session's workspace folder, read its history when the data dir keeps it, run
        ``steps``; returns the history (read from the database afterwards when that keeps it)."""
        folder = session.state_dir if session.storage is None else None

        def work() -> tuple[list[ModelMessage], list[int]] | None:
            session.workspace.mkdir(parents=True, exist_ok=True)
            read = read_file(folder) if folder is not None else None
            for step in steps:
                step()
            return read

        if self._limiter is None:
            # Made on the event loop that uses it (the host may be built before one runs).
            self._limiter = anyio.CapacityLimiter(OPEN_THREADS)
        read = await anyio.to_thread.run_sync(work, limiter=self._limiter)
        if folder is not None and read is not None:
            return History.of_file(folder, read)
        if session.storage is None:
            raise ValueError(f"the session of {session.scope} has no folder for its history")
        return await History.open_rows(session.storage.history, session.scope)
