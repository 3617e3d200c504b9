"""A call's time: its clock, moved on by progress, stopped while a person answers a question."""

from __future__ import annotations

import asyncio
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
    among its connection's calls in flight, whose one timer cancels the scope once ``deadline``
    has passed (``expired``).
    """

    __slots__ = ("_left", "_paused_at", "_running", "base", "deadline", "limit", "scope")

    def __init__(
        self, base: float, limit: float, now: float, running: CallClocks, scope: anyio.CancelScope
    ) -> None:
        self.base = base
        self.limit = limit
        """The latest deadline (the event loop's clock): the call's start plus ``call_max``."""
        self.deadline = min(now + base, limit)
        """When the call is cut (the event loop's clock); ``math.inf`` while paused."""
        self.scope = scope
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
    def expired(self) -> bool:
        """Whether the call was cut for its time (only the connection's timer cancels the scope)."""
        return self.scope.cancelled_caught

    @property
    def capped(self) -> bool:
        """Whether the deadline is the latest one (progress can no longer move it)."""
        return self.deadline >= self.limit

    def progressed(self) -> None:
        # Only ever later: the connection's timer, set for an earlier time, looks again then.
        if self._left is None:
            self.deadline = min(anyio.current_time() + self.base, self.limit)
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
            self._left = max(0.0, self.deadline - now)
            self._paused_at = now
            self.deadline = math.inf

    def resume(self, now: float) -> None:
        if self._left is not None:
            self.limit += now - self._paused_at
            self.deadline = min(now + self._left, self.limit)
            self._left = None


class CallClocks:
    """The clocks of one connection's calls in flight; a question to a person stops them all.

    One timer serves them all: it is set again only for a deadline earlier than the one it is
    set for, and when it goes off it cuts the calls whose time is up and is set for the next
    deadline. Calls one after another with the same timeout set it about once a timeout, not
    once a call; progress, which only ever moves a deadline later, never touches it.
    """

    def __init__(self) -> None:
        self._clocks: set[CallClock] = set()
        self._questions = 0
        self._timer: asyncio.TimerHandle | None = None
        self._wakes_at = math.inf
        self._scope_class: type[anyio.CancelScope] | None = None

    @staticmethod
    def now() -> float:
        """The event loop's clock (``anyio.current_time()``'s, without its look-up of the loop's library)."""
        return asyncio.get_running_loop().time()

    def start(self, base: float, limit: float, now: float) -> CallClock:
        """The clock of a call starting ``now`` (the event loop's clock); counted while inside its ``with``."""
        if self._scope_class is None:
            # ``anyio.CancelScope()`` makes its event loop's own scope class, after looking the
            # loop's library up; a call makes that same class directly (a third of the cost).
            self._scope_class = type(anyio.CancelScope())
        return CallClock(base, limit, now, self, self._scope_class())

    def add(self, clock: CallClock) -> None:
        if self._questions:
            clock.pause(anyio.current_time())
        self._clocks.add(clock)
        self._wake_by(clock.deadline)

    def discard(self, clock: CallClock) -> None:
        # The timer stays: the next call's deadline is likely later, and needs no new one. It
        # goes off once, finds nothing to cut and is not set again.
        self._clocks.discard(clock)

    def stop(self) -> None:
        """The connection ended: its timer goes, unless a call is still in flight (its time still runs)."""
        if self._timer is not None and not self._clocks:
            self._timer.cancel()
            self._timer, self._wakes_at = None, math.inf

    def _wake_by(self, deadline: float) -> None:
        if deadline < self._wakes_at:
            if self._timer is not None:
                self._timer.cancel()
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(deadline, self._time_up, loop)
            self._wakes_at = deadline

    def _time_up(self, loop: asyncio.AbstractEventLoop) -> None:
        # A callback of the loop's, outside any task: anyio cannot tell its event loop here
        # (unless it started the loop), so the time is the loop's own (which anyio's is).
        self._timer, self._wakes_at = None, math.inf
        now = loop.time()
        for clock in self._clocks:
            if clock.deadline <= now:
                clock.scope.cancel()
            else:
                self._wake_by(clock.deadline)

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
                    self._wake_by(clock.deadline)
