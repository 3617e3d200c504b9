"""A chat's servers as rows of a database (the core's ``ServerRows``), sealed as the file's entries.

Each row holds one entry exactly as the file would (``seal_entry``: the chat's scope and every
visible field bound into an AES-GCM seal), so a row changed or moved to another chat does not
open. What the file backend keeps outside the workspace, the rollback record, has no "outside"
in a database: whoever can write the rows can write the record too. So the record is sealed as
well: the chat's scope, the generation of the last write, the number of rows and a digest of
every row (its name, its generation and its bytes) are bound into a seal under the host's key.
A row put back from an earlier write, deleted, or added by hand no longer matches the record,
and the chat's servers are refused as a whole, as a rolled-back file is.

A whole earlier state (record and rows together, from a backup) verifies; the host side catches
it while it runs: ``RowMemory`` remembers, per chat, the highest generation this process saw
and the state it wrote last, so an older generation is refused and ``restore`` puts back the
state it wrote. After a restart only the database remembers, as only the private folder does
for files.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from ...core import ServerRow, ServerRows, StoredServers
from ...exceptions import StoreError
from ._entry import ServerEntry
from ._entry_seal import EntryRejected, open_entry, seal_entry
from ._same_server import same_server
from ._seal import JSONValue, Sealer, SealError, canonical_json
from ._server_file import count
from ._store import LoadResult, Rejected, Saved

__all__ = ["RowMemory", "RowServers", "encode_row", "record_of", "rows_digest"]

logger = logging.getLogger(__name__)

_RECORD_PURPOSE: Final = "servers-record"
_RESTORE_HINT: Final = "the owner can put back the servers Playa saved last with /mcp_restore"

Change = Callable[[dict[str, ServerRow | bytes]], tuple[dict[str, ServerRow | bytes], bool]]
"""A write's change of the rows by name: a row kept as it is, or new entry bytes; and whether
it changed what the owner asked about (``Saved.changed``)."""


@dataclass
class RowMemory:
    """What the host side remembers of each chat's rows while it runs: shared by every store of
    the process, so a chat's store made afresh (a session reopened) remembers too."""

    seen: dict[str, int] = field(default_factory=dict)
    """The highest generation verified or written, per scope."""
    written: dict[str, StoredServers] = field(default_factory=dict)
    """The state this process wrote last, per scope: what ``restore`` puts back."""


def encode_row(sealer: Sealer, scope: str, entry: ServerEntry) -> bytes:
    """The bytes of a row holding ``entry`` sealed for ``scope`` (the file's entry, canonical JSON)."""
    return canonical_json(seal_entry(sealer, scope, entry))


def rows_digest(rows: Mapping[str, ServerRow]) -> str:
    """SHA-256 over every row, in name order: its name, its generation and its bytes' digest."""
    listed: list[JSONValue] = [
        [name, rows[name].generation, hashlib.sha256(rows[name].entry).hexdigest()] for name in sorted(rows)
    ]
    return hashlib.sha256(canonical_json(listed)).hexdigest()


def _record_context(scope: str, generation: int, rows: Mapping[str, ServerRow]) -> dict[str, JSONValue]:
    return {
        "purpose": _RECORD_PURPOSE,
        "scope": scope,
        "generation": generation,
        "entries": len(rows),
        "digest": rows_digest(rows),
    }


def record_of(sealer: Sealer, scope: str, generation: int, rows: Mapping[str, ServerRow]) -> bytes:
    """The sealed record of a write: scope, generation and every row bound under the host's key."""
    envelope = sealer.seal(_record_context(scope, generation, rows), {})
    fields: dict[str, JSONValue] = {"v": envelope["v"], "kid": envelope["kid"], "nonce": envelope["nonce"]}
    fields["ct"] = envelope["ct"]
    return canonical_json(fields)


def _strict_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise ValueError("a repeated key")
    return dict(pairs)


@dataclass(eq=False)
class RowServers:
    """A chat's servers in a database's rows (``ServerStorage``); every read verifies the record."""

    rows: ServerRows = field(repr=False)
    scope: str
    sealer: Sealer = field(repr=False)
    memory: RowMemory = field(repr=False)
    _loaded: int | None = field(default=None, init=False, repr=False)
    """The generation the last load read (None: no load yet)."""
    _loaded_whole: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.scope, str) or not self.scope:
            raise ValueError("scope must be a non-empty string")

    # --- reading -----------------------------------------------------------------------

    async def changed(self) -> bool:
        """Whether the rows may differ from what the last ``load`` read: one read of the generation."""
        return self._loaded is None or await self.rows.generation(self.scope) != self._loaded

    async def load(self) -> LoadResult:
        """The entries whose seals open, every other row with a reason; never raises for a row."""
        stored = await self.rows.read(self.scope)
        self._loaded = stored.generation
        result = self._verified(stored)
        self._loaded_whole = result.warning is None and not result.rejected
        return result

    def _refusal(self, stored: StoredServers) -> str | None:
        """Why the stored rows are not what Playa wrote (no name is shown), or None."""
        seen = self.memory.seen.get(self.scope, 0)
        if stored.record is None:
            if stored.rows:
                return f"the database holds {count(len(stored.rows))} that Playa did not record writing"
            if seen > 0:
                return f"the servers Playa saved are gone from the database; {_RESTORE_HINT}"
            return None
        try:
            envelope = json.loads(stored.record, object_pairs_hook=_strict_object)
            self.sealer.open(envelope, _record_context(self.scope, stored.generation, stored.rows))
        except SealError as exc:
            return f"the servers' record does not verify ({exc.reason}), so none is used; {_RESTORE_HINT}"
        except (ValueError, RecursionError):
            return f"the servers' record is malformed, so none is used; {_RESTORE_HINT}"
        if stored.generation < seen:
            return f"the database holds an older copy of the servers Playa saved, so none is used; {_RESTORE_HINT}"
        return None

    def _verified(self, stored: StoredServers) -> LoadResult:
        if (refused := self._refusal(stored)) is not None:
            return LoadResult(warning=refused, refused=True)
        self._saw(stored.generation)
        entries: list[ServerEntry] = []
        rejected: list[Rejected] = []
        for index, name in enumerate(sorted(stored.rows)):
            try:
                raw = json.loads(stored.rows[name].entry, object_pairs_hook=_strict_object)
                entry = open_entry(self.sealer, self.scope, raw)
            except EntryRejected as exc:
                rejected.append(Rejected(index, name, exc.reason))
                continue
            except (ValueError, RecursionError):
                rejected.append(Rejected(index, name, "malformed: the row is not one JSON object"))
                continue
            if entry.name != name:
                rejected.append(
                    Rejected(index, name, "seal does not verify: the row is filed under another name")
                )
                continue
            entries.append(entry)
        return LoadResult(tuple(entries), tuple(rejected))

    def _saw(self, generation: int) -> None:
        if generation > self.memory.seen.get(self.scope, 0):
            self.memory.seen[self.scope] = generation

    # --- writing -----------------------------------------------------------------------

    async def save(self, entries: Sequence[ServerEntry]) -> Saved:
        """Replace the chat's servers with exactly ``entries`` (each sealed afresh)."""
        names = [entry.name for entry in entries]
        if len(set(names)) != len(names):
            dupe = next(n for n in names if names.count(n) > 1)
            raise StoreError(f"cannot save two servers named {dupe!r}")
        new: dict[str, ServerRow | bytes] = {e.name: encode_row(self.sealer, self.scope, e) for e in entries}
        return await self._update(lambda _rows: (dict(new), True))

    async def put(self, entry: ServerEntry) -> Saved:
        """Add ``entry``, replacing its namesake; ``changed`` when one was replaced."""
        data = encode_row(self.sealer, self.scope, entry)

        def change(rows: dict[str, ServerRow | bytes]) -> tuple[dict[str, ServerRow | bytes], bool]:
            replaced = entry.name in rows
            return {**rows, entry.name: data}, replaced

        return replace(await self._update(change), entry=entry)

    async def rewrite(self, entry: ServerEntry, *, built_from: ServerEntry) -> Saved | None:
        """Write ``entry`` over its namesake only while that is still ``built_from``'s server
        (``same_server``, compared in the rows' transaction); None when it is not, nothing written."""
        data = encode_row(self.sealer, self.scope, entry)
        dropped = False

        def change(rows: dict[str, ServerRow | bytes]) -> tuple[dict[str, ServerRow | bytes], bool]:
            nonlocal dropped
            stored = rows.get(entry.name)
            dropped = not isinstance(stored, ServerRow) or not self._holds(entry.name, stored, built_from)
            return (rows, False) if dropped else ({**rows, entry.name: data}, True)

        saved = await self._update(change, always=False)
        if dropped:
            logger.debug(
                "%s in %s is not the entry its writer was built from: not written", entry.name, self.scope
            )
            return None
        return replace(saved, entry=entry)

    def _holds(self, name: str, row: ServerRow, built_from: ServerEntry) -> bool:
        try:
            raw = json.loads(row.entry, object_pairs_hook=_strict_object)
            stored = open_entry(self.sealer, self.scope, raw)
        except (EntryRejected, ValueError, RecursionError):
            return False
        return stored.name == name and same_server(stored, built_from)

    def taken(self, saved: Saved) -> None:
        """The caller's view holds what ``saved`` wrote: the rows count as read."""
        if isinstance(saved.follows, int):
            self._loaded = saved.follows

    async def remove(self, name: str) -> Saved:
        """Remove the row called ``name``, usable or not; ``changed`` False when there was none."""

        def change(rows: dict[str, ServerRow | bytes]) -> tuple[dict[str, ServerRow | bytes], bool]:
            kept = {n: row for n, row in rows.items() if n != name}
            return kept, len(kept) != len(rows)

        return await self._update(change, always=False)

    async def restore(self) -> Saved:
        """Put back the state this process wrote last (``/mcp_restore``)."""
        copy = self.memory.written.get(self.scope)
        if copy is None:
            raise StoreError(
                "there is no saved copy to restore: no server was saved here since this Playa started"
            )
        changed = False

        def apply(stored: StoredServers) -> StoredServers | None:
            nonlocal changed
            same = {n: r.entry for n, r in stored.rows.items()} == {n: r.entry for n, r in copy.rows.items()}
            if same and self._refusal(stored) is None:
                return None
            changed = True
            return self._written(stored, {name: row.entry for name, row in copy.rows.items()})

        stored = await self.rows.update(self.scope, apply)
        if changed:
            self._remember(stored)
        return Saved(changed)

    async def _update(self, change: Change, *, always: bool = True) -> Saved:
        """A locked read-modify-write of the rows; a refused state is never the starting point."""
        notes: list[str] = []
        changed = wrote = follows = False

        def apply(stored: StoredServers) -> StoredServers | None:
            nonlocal changed, wrote, follows
            notes.clear()
            follows = self._loaded_whole and stored.generation == self._loaded
            rows: dict[str, ServerRow | bytes] = dict(stored.rows)
            if (refused := self._refusal(stored)) is not None:
                # Not what Playa wrote: the owner's change starts from the state it wrote last,
                # never from rows put back or forged.
                copy = self.memory.written.get(self.scope)
                rows = dict(copy.rows) if copy is not None else {}
                notes.append(refused.split(";")[0])
                notes.append(f"I started from the copy Playa saved last ({count(len(rows))})")
            updated, changed = change(rows)
            wrote = always or changed or bool(notes)
            return self._written(stored, updated) if wrote else None

        stored = await self.rows.update(self.scope, apply)
        if wrote:
            self._remember(stored)
        token = stored.generation if follows and not notes else None
        return Saved(changed, tuple(notes), follows=token)

    def _written(self, stored: StoredServers, updated: Mapping[str, ServerRow | bytes]) -> StoredServers:
        """The state to store: ``updated``'s new entries at the next generation, and a record of it."""
        generation = max(stored.generation, self.memory.seen.get(self.scope, 0)) + 1
        rows = {
            name: value if isinstance(value, ServerRow) else ServerRow(generation, value)
            for name, value in updated.items()
        }
        return StoredServers(generation, record_of(self.sealer, self.scope, generation, rows), rows)

    def _remember(self, stored: StoredServers) -> None:
        self._saw(stored.generation)
        self.memory.written[self.scope] = stored
