"""A call's time: its clock, moved on by progress, stopped while a person answers a question."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.shared.dispatcher import ProgressFnT

__all__ = ["CallClock", "CallClocks", "Progress", "ProgressReport"]


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a call has come, as the server reports it: a progress notification, or a task's state."""

    progress: float | None = None
    total: float | None = None
    message: str | None = None
    """The server's words (not redacted: whoever shows them redacts them)."""


ProgressReport = Callable[[Progress], Awaitable[None]]
"""Told of each progress of one call."""


class CallClock:
    """One call's time: ``base`` seconds from its start or its last progress, never past ``limit``.

    A question to a person stops it (``pause``), and the time the person took is added back.
    Made by ``CallClocks.start``; ``with clock:`` runs the call in its cancel scope, counted
    among its connection's calls in flight.
    """

    __slots__ = ("_left", "_paused_at", "_running", "base", "limit", "scope")

    def __init__(self, base: float, limit: float, now: float, running: CallClocks) -> None:
        self.base = base
        self.limit = limit
        """The latest deadline (the event loop's clock): the call's start plus ``call_max``."""
        self.scope = anyio.CancelScope(deadline=min(now + base, limit))
        self._left: float | None = None
        """While paused: the seconds the call had left."""
        self._paused_at = 0.0
        self._running = running

    def __enter__(self) -> CallClock:
        self.scope.__enter__()
        self._running.add(self)
        return self

    def __exit__(self, *exc_info: Any) -> bool:
        self._running.discard(self)
        return self.scope.__exit__(*exc_info)

    @property
    def capped(self) -> bool:
        """Whether the deadline is the latest one (progress can no longer move it)."""
        return self.scope.deadline >= self.limit

    def progressed(self) -> None:
        now = anyio.current_time()
        if self._left is None:
            self.scope.deadline = min(now + self.base, self.limit)
        else:
            self._left = self.base

    def progress_callback(self, report: ProgressReport | None) -> ProgressFnT:
        """The SDK's progress callback of the call: each progress gives it its time again, and is reported."""

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            # The server is alive and working: the call gets its time again (up to call_max).
            self.progressed()
            if report is not None:
                await report(Progress(progress=progress, total=total, message=message))

        return progressed

    def pause(self, now: float) -> None:
        if self._left is None:
            self._left = max(0.0, self.scope.deadline - now)
            self._paused_at = now
            self.scope.deadline = math.inf

    def resume(self, now: float) -> None:
        if self._left is not None:
            self.limit += now - self._paused_at
            self.scope.deadline = min(now + self._left, self.limit)
            self._left = None


class CallClocks:
    """The clocks of one connection's calls in flight; a question to a person stops them all."""

    def __init__(self) -> None:
        self._clocks: set[CallClock] = set()
        self._questions = 0

    def start(self, base: float, limit: float, now: float) -> CallClock:
        """The clock of a call starting ``now`` (the event loop's clock); counted while inside its ``with``."""
        return CallClock(base, limit, now, self)

    def add(self, clock: CallClock) -> None:
        if self._questions:
            clock.pause(anyio.current_time())
        self._clocks.add(clock)

    def discard(self, clock: CallClock) -> None:
        self._clocks.discard(clock)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """While a person answers a question, the call timeouts stand still: a person is no hung server."""
        if self._questions == 0:
            now = anyio.current_time()
            for clock in self._clocks:
                clock.pause(now)
        self._questions += 1
        try:
            yield
        finally:
            self._questions -= 1
            if self._questions == 0:
                now = anyio.current_time()
                for clock in self._clocks:
                    clock.resume(now)
