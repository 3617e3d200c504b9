"""One task in an owner's task group that stops every connection of that group once it is cancelled."""

from __future__ import annotations

from typing import Protocol

import anyio

__all__ = ["OwnerWatch", "Stoppable"]


class Stoppable(Protocol):
    """A connection, as its watch sees it."""

    def stop(self) -> None:
        """Ask its task to close the session, without waiting."""
        ...


class OwnerWatch:
    """The connections whose tasks run in one task group, and the one task that stops them when
    the group is cancelled.

    Once connected, a connection's task shields its session: the group's cancellation would end
    the SDK's tasks one by one, and the session without its DELETE. This task is not shielded: it
    is cancelled in their place and asks each connection to stop, which closes its session within
    the close timeout. It ends once no connection it watches is left (the group's normal end never
    waits for it); the connector starts another for the next connection.
    """

    def __init__(self) -> None:
        self._connections: set[Stoppable] = set()
        self._none_left = anyio.Event()

    def __repr__(self) -> str:
        return f"<OwnerWatch of {len(self._connections)} connections{', ended' if self.ended else ''}>"

    @property
    def ended(self) -> bool:
        """True once no connection is left to watch, or the group was cancelled."""
        return self._none_left.is_set()

    def watch(self, connection: Stoppable) -> None:
        """Stop ``connection`` too when the group is cancelled (until it ends: ``closed``)."""
        self._connections.add(connection)

    def closed(self, connection: Stoppable) -> None:
        """``connection``'s task has ended."""
        self._connections.discard(connection)
        if not self._connections:
            self._none_left.set()

    async def run(self) -> None:
        """Wait until no connection is left; cancelled before that, stop every one left."""
        try:
            await self._none_left.wait()
        finally:
            self._none_left.set()
            for connection in list(self._connections):
                connection.stop()
