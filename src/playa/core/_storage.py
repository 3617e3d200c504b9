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

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias

__all__ = [
    "AuditRows",
    "ChatLeases",
    "ChatRows",
    "HistoryRows",
    "Leadership",
    "LeaseTaken",
    "Lost",
    "PendingLogins",
    "RecordRows",
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


class ChatRows(Protocol):
    """A chat's state of one kind as rows, which go with the chat when it gets a new scope."""

    async def move(self, old_scope: str, new_scope: str) -> bool:
        """Make ``old_scope``'s rows ``new_scope``'s (a chat that got a new scope); nothing is
        moved, and False returned, when ``new_scope`` has rows of its own."""
        ...


class HistoryRows(ChatRows, Protocol):
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


class WorkspaceRows(ChatRows, Protocol):
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


class RecordRows(Protocol):
    """A front end's records of one kind (its inbox, its outbox): sealed bytes by name, per chat.

    ``bot`` names the front end's bot (bots sharing a database keep apart); names sort in the
    order the records must be handled. A record that is ``done`` is gone for ``load``; an inbox
    keeps its name a while, so that the same update received again is known (``add``).
    """

    async def add(self, bot: str, name: str, chat: str, sealed: bytes) -> bool:
        """Keep a new record, committed when this returns; False (nothing written) when the
        name is known already: kept, or done not long ago."""
        ...

    async def put(self, bot: str, name: str, chat: str, sealed: bytes) -> None:
        """Keep the record, replacing one of the same name."""
        ...

    async def done(self, bot: str, name: str) -> None:
        """The record is handled (an inbox) or delivered (an outbox): never loaded again."""
        ...

    async def load(self, bot: str, chat: str | None = None) -> list[tuple[str, bytes]]:
        """The records not done, of one chat (None: every chat), by name."""
        ...


class Lost(Protocol):
    """Set when something held is lost (a listening connection)."""

    def is_set(self) -> bool: ...

    async def wait(self) -> None: ...


LeaseTaken: TypeAlias = Literal["held", "new", "moved"]
"""A lease taken: renewed by its holder, new (nobody held it), or moved from a holder whose
lease had expired."""


class Leadership(Protocol):
    """An attempt to be the one process of a bot doing something (polling Telegram)."""

    @property
    def held(self) -> bool:
        """Whether this process is the leader; False once the hold is lost."""
        ...

    async def check(self) -> bool:
        """Whether the hold still stands (one round trip); False, and ``held`` with it, when lost."""
        ...


class ChatLeases(Protocol):
    """Which process serves each chat of a bot: a lease per chat, renewed by its holder.

    A holder is a process's name; a lease not renewed within its seconds may be taken by another
    (its holder is presumed dead). Whoever holds a chat is woken (``listen``) when a record of
    that chat is added by another process.
    """

    async def take(self, bot: str, chat: str, holder: str, seconds: float) -> LeaseTaken | None:
        """Hold ``chat`` for ``seconds`` from now, unless another holder's lease is still valid
        (None)."""
        ...

    async def remaining(self, bot: str, chat: str) -> float | None:
        """Seconds until the lease of ``chat`` expires (0 or less: expired); None: nobody's."""
        ...

    async def renew(self, bot: str, holder: str, seconds: float) -> set[str]:
        """Extend every lease ``holder`` still has by ``seconds`` from now; returns their chats."""
        ...

    async def release(self, bot: str, holder: str, chats: Sequence[str] | None = None) -> None:
        """Give up ``holder``'s leases of ``chats`` (None: all of them)."""
        ...

    async def orphans(self, bot: str, holder: str, limit: int) -> list[str]:
        """Chats with records waiting (inbox or outbox) whose lease nobody holds, or has expired."""
        ...

    async def prune(self, bot: str, older_than: float) -> int:
        """Forget the names of inbox records done more than ``older_than`` seconds ago; how many."""
        ...

    def listen(self, bot: str, woken: Callable[[str], None]) -> contextlib.AbstractAsyncContextManager[Lost]:
        """For the block, ``woken(chat)`` is called when any process adds a record of ``chat``;
        the block gets an event set when the listening connection is lost."""
        ...

    def leader(self, bot: str, what: str) -> contextlib.AbstractAsyncContextManager[Leadership]:
        """Try, once, to be the one process of ``bot`` doing ``what``, for the block."""
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
    def inbox(self) -> RecordRows: ...

    @property
    def outbox(self) -> RecordRows: ...

    @property
    def leases(self) -> ChatLeases: ...

    @property
    def audit(self) -> AuditRows: ...

    @property
    def where(self) -> str:
        """Where the state is, as replies and logs may show it (no credential)."""
        ...

    async def claim_key(self, purpose: str, key_id: str) -> None:
        """Record the key id ``purpose``'s seals are made with, or refuse another (``ConfigError``)."""
        ...


class AuditRows(ChatRows, Protocol):
    """A chat's audit log as rows: each record's bytes by its sequence number, and the head (how
    far the log went), both as the writer sealed them.

    An append and its head are written together, and only over the head the writer read: of two
    processes that both think they hold the chat, one appends and the other is told, so the chain
    is never interleaved.
    """

    async def append(
        self, scope: str, known: bytes | None, records: Sequence[tuple[int, bytes]], head: bytes
    ) -> bool:
        """Add ``records`` (sequence number, bytes) and replace the head with ``head``, in one
        transaction, while the stored head is still ``known`` (None: there is none); False, and
        nothing written, when it is not (another writer's head is there, or a record's number is
        taken)."""
        ...

    async def read(self, scope: str) -> tuple[bytes | None, list[tuple[int, bytes]]]:
        """The head and every record, by sequence number, from one snapshot."""
        ...

    async def last(self, scope: str, count: int) -> tuple[bytes | None, list[tuple[int, bytes]]]:
        """The head and the ``count`` records of the highest sequence numbers, in order."""
        ...

    async def scopes(self) -> list[str]:
        """Every chat that has an audit log here, sorted."""
        ...
