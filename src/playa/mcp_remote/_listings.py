"""What the chat's prompts and skills share: each server's listings, made one at a time and held
against its pins, and the requests that may find its connection broken.

``ChatPrompts`` and ``ChatSkills`` are the kinds; each lists and holds its own way (``listing``).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from typing import ClassVar, TypeVar

import anyio

from ..core import KeyedLocks
from ..exceptions import CallFailed, RemoteError, RemoteTimeout, ToolError
from ._review import Review
from ._server import ChatContext, RemoteServer
from .store import Pins
from .transport import Connection

__all__ = ["ServerListings"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ServerListings(ABC):
    """The chat's listings of one kind (``kind``: "prompts", "skills") of its servers' definitions."""

    kind: ClassVar[str]

    def __init__(self, context: ChatContext, review: Review) -> None:
        self._context = context
        self._review = review
        self._timeout = context.settings.connection.call_timeout
        self._redact = context.secrets.redact_out
        self._locks: KeyedLocks[str] = KeyedLocks()

    @abstractmethod
    async def listing(self, server: RemoteServer, connection: Connection | None = None, /) -> object:
        """List the server's definitions now and hold them against its pins (each kind its way)."""

    async def _refresh(self, server: RemoteServer, connection: Connection) -> None:
        """List on ``connection`` in the background: a failure is logged, never raised."""
        try:
            await self.listing(server, connection)
        except (RemoteError, ToolError) as exc:
            logger.info(
                "%s: listing the %s of %s failed: %s",
                self._context.session.scope,
                self.kind,
                server.entry.name,
                exc,
            )
        except Exception as exc:  # boundary: this runs in the task group every chat of the host shares
            logger.error(
                "%s: listing the %s of %s failed: %s",
                self._context.session.scope,
                self.kind,
                server.entry.name,
                type(exc).__name__,
            )

    def _lock(self, server: RemoteServer) -> anyio.Lock:
        """The server's listing lock: one listing of this kind at a time."""
        return self._locks.of(server.entry.name)

    @staticmethod
    def _tools_pinned(server: RemoteServer) -> Pins | None:
        """The server's pins once its tools are pinned, else None.

        An adopted listing is saved with the tool pins only once those are: an entry whose tools
        were never pinned must not be given an empty list of approved tools.
        """
        pins = server.entry.pins
        return pins if pins is not None and pins.instructions is not None else None

    @staticmethod
    async def _asked(server: RemoteServer, connection: Connection, request: Awaitable[T]) -> T:
        """The answer to ``request`` on the server's ``connection``; a call that failed or timed out
        drops the connection (``call_failed``), and raises."""
        try:
            return await request
        except (CallFailed, RemoteTimeout) as exc:
            server.call_failed(connection, exc)
            raise
