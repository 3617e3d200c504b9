"""The per-chat file of remote MCP servers: sealed entries in ``.volcanic/mcp/servers.json``.

The file lives in the chat's workspace. The agent's file tools are fenced off ``.volcanic/``,
but other writers may reach it, so nothing in it is trusted until its seal opens: the seal
binds the header values to the chat's scope and to every visible field, so no one without the
host secret can add, edit, redirect, rename or move an entry.

File format (version 1)::

    {"version": 1, "generation": 7, "servers": [
      {"name": "docs", "url": "https://…/mcp?api_key=[redacted]", "transport": "auto", "tools": null,
       "auth": {"kind": "bearer", "headers": ["Authorization"]},
       "seal": {"v": 1, "kid": "…", "nonce": "…", "ct": "…"}}]}

The visible ``url`` is masked (``_url.py``); when it differs from the real one, the real URL is
sealed with the headers under ``:url`` (never a header name), and opening checks that masking
it gives the visible one. An entry written before URLs were sealed shows its own ``url``.

An entry of kind ``oauth`` has no headers; its ``OAuthGrant`` (client registration, tokens,
issuer, resource) is sealed under ``:oauth``, a key that can never be a header name.

The digests of the tool definitions the owner approved, and of those they rejected
(``_pins.Pins``), are sealed under ``:pins``. An entry without them (written before Playa
pinned tools, or just added) adopts the server's tool list on its first connect.

The owner's call policies for the server and its tools (``_policy.Policy``) are sealed under
``:policy``, only when the owner set one: an entry without takes the host's default.

Writes replace only what they touch: ``put`` and ``remove`` keep every other raw entry as it
is, including entries that fail to verify, so the owner keeps seeing those in ``/mcp_list``
until they remove them or add the name again. ``save`` writes exactly the entries given.
``rewrite`` is a server's write of its own entry: it lands only while the file holds the entry
that server was built from (``_same_server``), so a late write never undoes a replacement.

The parts: ``_entry`` (an entry and its rules), ``_entry_seal`` (an entry as the file holds
it, sealed), ``_server_file`` (the file, its lock, its copy and rollback record).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...exceptions import StoreError
from ._entry import ServerEntry
from ._entry_seal import EntryRejected, open_entry, raw_name, seal_entry
from ._same_server import same_server
from ._seal import JSONValue, Sealer
from ._server_file import (
    RESTORE_HINT,
    FileSignature,
    ServerFile,
    Unreadable,
    parse_document,
    refusal,
)

__all__ = ["LoadResult", "Rejected", "Saved", "ServerStore", "UnopenedFile"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rejected:
    """An entry of the file that is ignored, and why (safe to show the owner)."""

    index: int
    """Position in the file's ``servers`` list (0-based)."""
    name: str | None
    """The entry's ``name`` if it is text (it may be anything the agent wrote), else None."""
    reason: str


@dataclass(frozen=True)
class LoadResult:
    """What a load found: usable entries, ignored ones, and a warning when the file is unusable."""

    entries: tuple[ServerEntry, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    warning: str | None = None
    signature: FileSignature | None = None
    """The file's signature taken before reading; None when there is no file."""
    refused: bool = False
    """The file is not the one this store wrote last (rolled back, replaced or deleted)."""

    def entry(self, name: str) -> ServerEntry | None:
        """The usable entry called ``name``, if any."""
        return next((e for e in self.entries if e.name == name), None)


@dataclass(frozen=True)
class UnopenedFile:
    """A sealed file as ``ServerStore.read`` found it, not yet opened (``ServerStore.opened``)."""

    signature: FileSignature | None
    data: bytes | None = None
    failed: LoadResult | None = None
    """The load's result when the file or its lock could not be read, or the file is not the one
    the private record names."""


@dataclass(frozen=True)
class Saved:
    """What a write did: ``changed`` (replaced, removed, restored) and notes for the owner."""

    changed: bool
    notes: tuple[str, ...] = ()
    entry: ServerEntry | None = field(default=None, compare=False)
    """The entry ``put`` sealed, as written: the caller picks it up from this value."""
    follows: object | None = field(default=None, compare=False)
    """The backend's token of its state (the file's signature, the rows' generation) after a
    write that changed nothing but what it was asked to, in the state as the last ``load`` read
    it (no other writer since, nothing set aside, no entry that failed verification): the caller
    that takes the change into its view tells the store so (``taken``), and the state is not
    read again. None otherwise."""


class ServerStore:
    """Reads and writes one chat's sealed server file.

    ``scope`` is the chat's session scope (``telegram:123``, ``console:default``); it is part
    of every seal, so an entry copied from another chat's file does not open here.
    I/O is blocking and small; callers on an event loop may run it in a worker thread.
    """

    def __init__(self, workspace: Path, scope: str, sealer: Sealer, *, state_dir: Path | None = None) -> None:
        if not isinstance(scope, str) or not scope:
            raise ValueError("scope must be a non-empty string")
        self._scope = scope
        self._sealer = sealer
        self._file = ServerFile(workspace, state_dir)
        self._loaded: FileSignature | None = None
        self._ever_loaded = False
        self._loaded_whole = False
        """The last load used every entry of the file (none failed verification, no warning)."""

    def __repr__(self) -> str:
        return f"ServerStore(path={str(self._file.path)!r}, scope={self._scope!r})"

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def scope(self) -> str:
        return self._scope

    # --- reading -----------------------------------------------------------------------

    def signature(self) -> FileSignature | None:
        """The file's current signature (one ``lstat``); None when there is no file."""
        return self._file.signature()

    def changed(self) -> bool:
        """Whether the file may differ from what the last ``load`` read (True before any load).

        Costs one ``lstat``. Writes through this store also count as changes, so the caller
        reloads after them like after any other edit, unless it took what a write did into its
        view (``taken``).
        """
        return not self._ever_loaded or self.signature() != self._loaded

    def load(self) -> LoadResult:
        """Read the file: the entries whose seals open, and every other entry with a reason.

        Never raises for anything in the file: a missing file means no servers; an unusable
        one means no servers and a warning for the owner.
        """
        return self.opened(self.read())

    def read(self) -> UnopenedFile:
        """The file's bytes as they are now, read under the lock and checked against the private
        record: ``opened`` makes the ``load`` of them. The blocking half of a load, for a worker
        thread."""
        signature = self.signature()
        self._loaded, self._ever_loaded = signature, True
        try:
            with self._file.locked(exclusive=False):
                record = self._file.read_record()
                try:
                    data = self._file.read_bytes()
                except Unreadable as exc:
                    hint = f"; {RESTORE_HINT}" if record is not None else ""
                    return UnopenedFile(
                        signature, failed=LoadResult(warning=exc.warning + hint, signature=signature)
                    )
        except StoreError as exc:
            return UnopenedFile(signature, failed=LoadResult(warning=str(exc), signature=signature))
        if record is not None and (refused := refusal(record, data)) is not None:
            return UnopenedFile(
                signature, failed=LoadResult(warning=refused, signature=signature, refused=True)
            )
        return UnopenedFile(signature, data)

    def opened(self, read: UnopenedFile) -> LoadResult:
        """The ``load`` of what ``read`` read: its entries opened, without touching the disk."""
        result = self._opened(read)
        self._loaded_whole = result.warning is None and not result.rejected
        return result

    def _opened(self, read: UnopenedFile) -> LoadResult:
        signature, data = read.signature, read.data
        if read.failed is not None:
            return read.failed
        if data is None:
            return LoadResult(signature=signature)
        try:
            servers = parse_document(data)
        except Unreadable as exc:
            return LoadResult(warning=exc.warning, signature=signature)
        return self._verify(servers, signature)

    def _verify(self, servers: list[object], signature: FileSignature | None) -> LoadResult:
        opened: list[tuple[int, ServerEntry]] = []
        rejected: list[Rejected] = []
        for index, raw in enumerate(servers):
            try:
                opened.append((index, open_entry(self._sealer, self._scope, raw)))
            except EntryRejected as exc:
                rejected.append(Rejected(index, raw_name(raw), exc.reason))
        # Two verified entries with one name can only come from an old copy spliced into the
        # file; keeping either could bring back a removed URL or header, so neither is used.
        counts = Counter(entry.name for _, entry in opened)
        entries: list[ServerEntry] = []
        for index, entry in opened:
            if counts[entry.name] > 1:
                reason = (
                    f"duplicate name: {counts[entry.name]} entries are named {entry.name!r}; add it again"
                )
                rejected.append(Rejected(index, entry.name, reason))
            else:
                entries.append(entry)
        rejected.sort(key=lambda r: r.index)
        return LoadResult(tuple(entries), tuple(rejected), None, signature)

    # --- writing -----------------------------------------------------------------------

    def save(self, entries: Sequence[ServerEntry]) -> Saved:
        """Replace the file with exactly ``entries`` (each sealed afresh)."""
        names = Counter(e.name for e in entries)
        if dupes := sorted(n for n, c in names.items() if c > 1):
            raise StoreError(f"cannot save two servers named {dupes[0]!r}")
        return self._update(lambda _servers: ([self._sealed(e) for e in entries], True))

    def put(self, entry: ServerEntry) -> Saved:
        """Add ``entry``, replacing every entry of that name; ``changed`` when one was replaced."""

        def change(servers: list[object]) -> tuple[list[object], bool]:
            kept = [raw for raw in servers if raw_name(raw) != entry.name]
            return [*kept, self._sealed(entry)], len(kept) != len(servers)

        return replace(self._update(change), entry=entry)

    def rewrite(self, entry: ServerEntry, *, built_from: ServerEntry) -> Saved | None:
        """Write ``entry`` over its namesake only while that is still ``built_from``'s server
        (``same_server``, compared under the file's lock); None when it is not, nothing written."""
        dropped = False

        def change(servers: list[object]) -> tuple[list[object], bool]:
            nonlocal dropped
            namesakes = [raw for raw in servers if raw_name(raw) == entry.name]
            dropped = len(namesakes) != 1 or not self._holds(namesakes[0], built_from)
            if dropped:
                return servers, False
            return [self._sealed(entry) if raw is namesakes[0] else raw for raw in servers], True

        saved = self._update(change, always=False)
        if dropped:
            logger.debug(
                "%s in %s is not the entry its writer was built from: not written", entry.name, self._scope
            )
            return None
        return replace(saved, entry=entry)

    def _holds(self, raw: object, built_from: ServerEntry) -> bool:
        try:
            return same_server(open_entry(self._sealer, self._scope, raw), built_from)
        except EntryRejected:
            return False

    def taken(self, saved: Saved) -> None:
        """The caller's view now holds what ``saved`` wrote: the file counts as read, unless it
        changed since (``Saved.follows``); a later ``changed`` is False until it changes."""
        if isinstance(saved.follows, FileSignature) and self.signature() == saved.follows:
            self._loaded = saved.follows

    def remove(self, name: str) -> Saved:
        """Remove every entry called ``name``, usable or not; ``changed`` False when there was none."""

        def change(servers: list[object]) -> tuple[list[object], bool]:
            kept = [raw for raw in servers if raw_name(raw) != name]
            return kept, len(kept) != len(servers)

        return self._update(change, always=False)

    def restore(self) -> Saved:
        """Put back the copy of the file this store wrote last (``/mcp_restore``)."""
        file = self._file
        if not file.keeps_copy:
            raise StoreError("this host keeps no copy of the server file to restore")
        with file.locked(exclusive=True):
            record = file.read_record()
            copy = file.read_copy(record)
            if record is None or copy is None:
                raise StoreError(
                    "there is no saved copy to restore: no server was saved here since Playa kept one"
                )
            notes: list[str] = []
            try:
                current = file.read_bytes()
            except Unreadable as exc:
                notes.append(file.set_aside(exc))
            else:
                if current == copy:
                    return Saved(False, ())
                if current is not None:
                    notes.append(file.set_aside(None))
            file.put_back(copy)
            return Saved(True, tuple(notes))

    def _update(
        self, change: Callable[[list[object]], tuple[list[object], bool]], *, always: bool = True
    ) -> Saved:
        """A locked read-modify-write: no other process's write lands in between and is lost."""
        file = self._file
        with file.locked(exclusive=True):
            # The file as the last load read it, whole: a write that changes nothing else leaves
            # the caller's view right but for what it wrote (``Saved.follows``).
            follows = self._ever_loaded and self._loaded_whole and file.signature() == self._loaded
            record = file.read_record()
            notes: list[str] = []
            try:
                data = file.read_bytes()
            except Unreadable as exc:
                notes.append(file.set_aside(exc))
                data = None
                servers: list[object] = file.trusted_copy(record, notes)
            else:
                if record is not None and refusal(record, data) is not None:
                    # Not the file this store wrote last: the owner's change starts from the copy
                    # that was, never from a rolled-back or foreign file.
                    if data is not None:
                        notes.append(file.set_aside(None))
                    servers = file.trusted_copy(record, notes)
                elif data is None:
                    servers = []
                else:
                    try:
                        servers = parse_document(data)
                    except Unreadable as exc:
                        notes.append(file.set_aside(exc))
                        servers = []
            updated, changed = change(servers)
            if always or changed or notes:
                file.write(updated, (record.generation if record else 0) + 1)
            return Saved(changed, tuple(notes), follows=file.signature() if follows and not notes else None)

    def _sealed(self, entry: ServerEntry) -> dict[str, JSONValue]:
        return seal_entry(self._sealer, self._scope, entry)
