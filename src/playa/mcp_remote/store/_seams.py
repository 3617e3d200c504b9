"""What the rest of ``mcp_remote`` needs of the store, as protocols each backend fills.

A chat's servers are kept in one of two places, chosen once by the host: the sealed file in
the workspace (``FileServers``, over ``ServerStore``) or rows of a database (``RowServers``,
over the core's ``ServerRows``). Both seal each entry alike, so what one wrote the other opens.

The seam is async. The database is reached over the network, so its backend must be awaited on
the event loop; the file backend's work is blocking (a lock, reads, an fsync) and runs in a
worker thread, as it did before there was a seam. The rejected alternative, a synchronous seam
with the database's backend calling back into the event loop from a worker thread, would hop
threads twice for every read and keep a thread waiting on the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ._audit_chain import AuditRecord, FieldValue
from ._entry import ServerEntry
from ._store import LoadResult, Saved

if TYPE_CHECKING:
    from ._audit import AuditLog
    from ._file_servers import FileServers
    from ._row_servers import RowServers

__all__ = ["AuditTrail", "EntryWriter", "ServerStorage"]


class EntryWriter(Protocol):
    """Where an entry is sealed: the owner's new one (``put``), or a server's own changed one
    (``rewrite``: a login's new grant, a review's pins, a policy)."""

    async def put(self, entry: ServerEntry) -> Saved:
        """Add ``entry``, replacing every entry of that name."""
        ...

    async def rewrite(self, entry: ServerEntry, *, built_from: ServerEntry) -> Saved | None:
        """Write ``entry`` over its namesake only while the stored one is still ``built_from``'s
        server (``same_server``), compared inside the backend's lock or transaction; None when it
        is not (replaced or removed meanwhile): nothing is written, and a late write of a server
        never undoes the owner's replacement of it."""
        ...


class ServerStorage(EntryWriter, Protocol):
    """A chat's servers, kept for its scope: read whole, changed one entry at a time, restorable."""

    @property
    def scope(self) -> str: ...

    async def changed(self) -> bool:
        """Whether the servers may differ from what the last ``load`` read (cheap)."""
        ...

    async def load(self) -> LoadResult:
        """The usable entries and the ignored ones; never raises for what is stored."""
        ...

    async def save(self, entries: Sequence[ServerEntry]) -> Saved: ...

    def taken(self, saved: Saved) -> None:
        """The caller's view holds what ``saved`` wrote: no need to read it back (``Saved.follows``)."""
        ...

    async def remove(self, name: str) -> Saved: ...

    async def restore(self) -> Saved:
        """Put back what this storage wrote last (after a rollback or deletion)."""
        ...


class AuditTrail(Protocol):
    """A chat's audit log as its parts write it."""

    @property
    def enabled(self) -> bool: ...

    def record(self, kind: str, **fields: FieldValue) -> None:
        """Add a record; it is kept shortly, without blocking the caller."""
        ...

    async def flush(self) -> None:
        """Wait until every record made so far is kept (or its loss was logged)."""
        ...

    async def latest(self, count: int) -> list[tuple[AuditRecord, bool]]:
        """The last ``count`` records, each with whether it verifies."""
        ...


if TYPE_CHECKING:

    def _filled(
        files: FileServers, rows: RowServers, log: AuditLog
    ) -> tuple[ServerStorage, ServerStorage, EntryWriter, AuditTrail]:
        """Never called: mypy checks here that the backends fill their seams."""
        return files, rows, files, log
