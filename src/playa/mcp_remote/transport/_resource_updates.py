"""What one connection subscribed to, and which of those resources the server since said changed."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

__all__ = ["ResourceUpdates"]


@dataclass
class ResourceUpdates:
    """One connection's subscriptions, and which of them the server since said changed.

    Only a subscribed URI is heard: a server sending updates for URIs nobody asked about grows nothing.
    """

    subscribed: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    _news: anyio.Event = field(default_factory=anyio.Event)

    def heard(self, uri: str) -> None:
        """The server said ``uri`` changed (``notifications/resources/updated``)."""
        if uri in self.subscribed:
            self.changed.add(uri)
            news, self._news = self._news, anyio.Event()
            news.set()

    async def wait(self) -> None:
        """Wait until the server says a subscribed resource changed (the caller bounds the wait)."""
        await self._news.wait()

    def take(self, uri: str) -> bool:
        """Whether ``uri`` changed since it was last read; it is being read again now."""
        if uri in self.changed:
            self.changed.discard(uri)
            return True
        return False
