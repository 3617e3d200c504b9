"""Where a chat's state is kept when not in the data dir: byte-level seams a database fills.

The host chooses once, at start, where state lives: the data dir (the default; these seams are
then unused) or a :class:`Storage` (PostgreSQL, ``playa.db``). The seams carry opaque bytes
plus what a query must find (the chat's scope, a name, a generation): what the bytes mean, and
their sealing, stay with the code that owns each piece of state (``mcp_remote.store`` seals a
server entry before it reaches a row). So the database code imports nothing above the core, and
a reader of the database learns no credential.

Every method is async: a database is reached over the network and the event loop must never
wait on it. A chat's state is named by its scope (``telegram:123``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "HistoryRows",
    "PendingLogins",
    "ServerRow",
    "ServerRows",
    "Storage",
    "StoredServers",
    "WorkspaceRows",
]


@dataclass(frozen=True)
class ServerRow:
    """One server of a chat as a row holds it: its sealed entry, and the generation that wrote it."""

    generation: int
    entry: bytes
    """The entry as the server file holds it (canonical JSON, its secrets sealed)."""


@dataclass(frozen=True)
class StoredServers:
    """A chat's servers as stored: the record of the last write and one row per server name.

    ``generation`` grows with every write (0: never written); ``record`` is the writer's sealed
    record of that write (None: never written), which a reader verifies against the rows.
    """

    generation: int = 0
    record: bytes | None = None
    rows: Mapping[str, ServerRow] = field(default_factory=dict)


class ServerRows(Protocol):
    """A chat's server entries as rows, read in one snapshot and written under the chat's lock."""

    async def generation(self, scope: str) -> int:
        """The generation of the chat's last write (0: none): one cheap read, for ``changed``."""
        ...

    async def read(self, scope: str) -> StoredServers:
        """The chat's record and rows, from one snapshot."""
        ...

    async def update(
        self, scope: str, change: Callable[[StoredServers], StoredServers | None]
    ) -> StoredServers:
        """A read-modify-write under the chat's lock: ``change`` gets the stored state and returns
        the state to store (None: nothing to write). Returns what is stored afterwards. No other
        writer's change lands in between and is lost; an exception from ``change`` writes nothing."""
        ...


class HistoryRows(Protocol):
    """A chat's conversation: one encoded message a row, in order."""

    async def load(self, scope: str) -> list[bytes]:
        """Every message of the chat, oldest first."""
        ...

    async def append(self, scope: str, messages: Sequence[bytes]) -> None:
        """Add one turn's messages after the others, kept when this returns."""
        ...

    async def clear(self, scope: str) -> None:
        """Forget every message of the chat."""
        ...

    async def move(self, old_scope: str, new_scope: str) -> bool:
        """Make ``old_scope``'s messages ``new_scope``'s (a chat that got a new scope); nothing is
        moved, and False returned, when ``new_scope`` has messages of its own."""
        ...


class WorkspaceRows(Protocol):
    """A chat's workspace as rows: one file a row, by its path relative to the workspace.

    Paths come checked (``workspace_path``: relative, no ``..``, never the host's folder); the
    quota is the most bytes the chat's files may hold together.
    """

    async def paths(self, scope: str, prefix: str) -> list[str]:
        """The paths of the chat's files that start with ``prefix`` (``""``: every one), sorted."""
        ...

    async def read(self, scope: str, path: str) -> bytes | None:
        """The file's bytes; None when there is none."""
        ...

    async def write(self, scope: str, path: str, data: bytes, *, quota: int | None) -> None:
        """Create or replace the file; raises ``WorkspaceError`` (``over_quota``), writing nothing,
        when the chat's files would hold more than ``quota`` bytes."""
        ...

    async def delete(self, scope: str, path: str) -> bool:
        """Remove the file; whether there was one."""
        ...

    async def move(self, old_scope: str, new_scope: str) -> bool:
        """Make ``old_scope``'s files ``new_scope``'s (a chat that got a new scope); nothing is
        moved, and False returned, when ``new_scope`` has files of its own."""
        ...


class PendingLogins(Protocol):
    """OAuth logins begun and waiting for their redirect, which any process may receive.

    A login is found by the SHA-256 of its ``state`` parameter (the state itself, a bearer of the
    login, is never stored) and taken once: of two processes that receive the same redirect, one
    gets the login and the other nothing.
    """

    async def put(self, state_hash: bytes, scope: str, server: str, sealed: bytes, expires_at: float) -> None:
        """Keep a login (its sealed bytes) until ``expires_at`` (seconds since the epoch)."""
        ...

    async def take(self, state_hash: bytes, now: float) -> tuple[str, str, bytes] | None:
        """The login's scope, server and sealed bytes, removed as they are returned; None when
        there is none (never begun, taken already, or expired at ``now``)."""
        ...


class Storage(Protocol):
    """The chats' state kept outside the data dir (``PLAYA_DATABASE_URL``), chosen once at start."""

    @property
    def servers(self) -> ServerRows: ...

    @property
    def history(self) -> HistoryRows: ...

    @property
    def workspace(self) -> WorkspaceRows: ...

    @property
    def logins(self) -> PendingLogins: ...

    @property
    def where(self) -> str:
        """Where the state is, as replies and logs may show it (no credential)."""
        ...

    async def claim_key(self, purpose: str, key_id: str) -> None:
        """Record the key id ``purpose``'s seals are made with, or refuse another (``ConfigError``)."""
        ...
