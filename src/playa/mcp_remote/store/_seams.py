"""What the rest of ``mcp_remote`` needs of the store, as protocols a second backend could implement.

``ServerStore`` (a sealed file in the workspace) and ``AuditLog`` (a chained file in the
chat's private folder) are the only backends; these name the seams they fill.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ._audit_chain import AuditRecord, FieldValue
from ._entry import ServerEntry
from ._store import LoadResult, Saved

if TYPE_CHECKING:
    from ._audit import AuditLog
    from ._store import ServerStore

__all__ = ["AuditTrail", "EntryWriter", "ServerStorage"]


class EntryWriter(Protocol):
    """Where one server's changed entry is sealed: a login's new grant, a review's pins, a policy."""

    def put(self, entry: ServerEntry) -> Saved:
        """Add ``entry``, replacing every entry of that name."""
        ...


class ServerStorage(EntryWriter, Protocol):
    """A chat's servers, kept for its scope: read whole, changed one entry at a time, restorable."""

    @property
    def scope(self) -> str: ...

    @property
    def path(self) -> Path:
        """Where the owner can find the servers (what replies name)."""
        ...

    def changed(self) -> bool:
        """Whether the servers may differ from what the last ``load`` read (cheap)."""
        ...

    def load(self) -> LoadResult:
        """The usable entries and the ignored ones; never raises for what is stored."""
        ...

    def save(self, entries: Sequence[ServerEntry]) -> Saved: ...

    def taken(self, saved: Saved) -> None:
        """The caller's view holds what ``saved`` wrote: no need to read it back (``Saved.follows``)."""
        ...

    def remove(self, name: str) -> Saved: ...

    def restore(self) -> Saved:
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

    def _filled(store: ServerStore, log: AuditLog) -> tuple[ServerStorage, EntryWriter, AuditTrail]:
        """Never called: mypy checks here that the backends fill their seams."""
        return store, store, log
