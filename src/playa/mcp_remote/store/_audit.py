"""A chat's audit log: what was done with its servers and tools, append-only and tamper-evident.

One JSON record a line, in the chat's private folder (``_audit_file``)::

    {"v": 1, "seq": 7, "time": "2026-12-03T16:11:22.123Z", "kind": "tool_call",
     "fields": {"server": "docs", "tool": "search", "outcome": "ok", ...},
     "prev": "<SHA-256 of record 6>", "mac": "<HMAC-SHA256>"}

chained and sealed with a key derived from the host secret (``_audit_chain``), and checked by
``verify_log``. With a database (``PLAYA_DATABASE_URL``) the same records are its rows
(``_audit_rows``), whichever process serves the chat, and ``verify_rows`` checks them.

A record holds names, counts, sizes, durations and outcomes: never an argument's value, a
result, a token or any other secret. Its text fields pass the chat's redactor all the same.

Appends cost the event loop a list append: the records are built, chained and written in a
worker thread, those of ``COMMIT_DELAY`` in one ``O_APPEND`` write and one fsync, then the head
is rewritten in place.

A chat whose scope changes (a Telegram group upgraded to a supergroup) goes on with its chain:
a ``chat_moved`` record sealed for the new scope names the old one (``move_log``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from ..._files import append_durably
from ...core import AuditRows
from ...exceptions import DatabaseError
from ._audit_chain import (
    GENESIS,
    AuditKey,
    AuditRecord,
    BadLine,
    Batch,
    ChainEnd,
    FieldValue,
    Head,
    moved,
    parse_record,
    verified,
)
from ._audit_file import audit_paths, latest_records, read_head, tail_of, write_head
from ._audit_rows import AuditRaced, RowWriter, latest_rows

__all__ = ["COMMIT_DELAY", "AuditLog", "move_log"]

COMMIT_DELAY: Final = 0.05
"""Seconds a batch collects records after its first: one fsync serves them all."""
_NAME_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,39}")
_MAX_TEXT: Final = 200

logger = logging.getLogger(__name__)


_NAMES_KEPT: Final = 1024
_good_names: set[str] = set()
"""Kinds and field names that passed ``_NAME_RE``: the code's own few dozen, each checked once
rather than five to ten times a call (bounded all the same)."""


def _check_names(kind: str, names: Iterable[str]) -> None:
    for name, what in [(kind, "kind"), *((name, "field") for name in names)]:
        if name not in _good_names:
            if not _NAME_RE.fullmatch(name):
                raise ValueError(f"an audit {what} is a short lower-case name, not {name!r}")
            if len(_good_names) < _NAMES_KEPT:
                _good_names.add(name)


def _checked(kind: str, fields: dict[str, FieldValue], redact: Callable[[str], str]) -> dict[str, FieldValue]:
    """``fields`` (a record's own keyword arguments, changed in place) checked: scalars only, each
    text redacted and cut to ``_MAX_TEXT``."""
    if kind not in _good_names or not _good_names.issuperset(fields):
        _check_names(kind, fields)
    for name, value in fields.items():
        if isinstance(value, str):
            text = redact(value)
            fields[name] = text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"
        elif value is not None and not isinstance(value, int):  # a bool is an int
            # Only scalars: a structure is how an argument or a result would slip in.
            raise TypeError(f"audit field {name!r} must be text, a whole number, a boolean or None")
    return fields


@dataclass
class _Writer(ChainEnd):
    """The chain's end and the files: used by one worker thread at a time."""

    folder: Path
    _torn: bool = False

    def _resume(self) -> tuple[int, str]:
        """Where the chain goes on: the head's record, or a later one a crash left unnamed."""
        log, head_path = audit_paths(self.folder)
        head = read_head(head_path, self.scope, self.key)
        tail = self._tail(log)
        if isinstance(head, Head):
            if tail is not None and tail.seq > head.seq:
                return tail.seq, tail.hash  # appended, and the crash came before the head was
            # Also when the log is shorter than the head says: the chain goes on from the head,
            # so the cut stays visible as a gap.
            return head.seq, head.hash
        if tail is not None:
            # The head is gone or broken while records exist: say so in the chain itself.
            self.head_lost(head or "missing", tail.seq)
            return tail.seq, tail.hash
        return 0, GENESIS

    def _tail(self, log: Path) -> AuditRecord | None:
        """The log's last record, if it verifies; reads at most the last 64 KiB."""
        chunk, self._torn = tail_of(log)
        for line in reversed(chunk.splitlines()):
            try:
                record = parse_record(line)
            except BadLine:
                return None
            return record if record.verifies(self.key, self.scope) else None
        return None

    def append(self, batch: Batch) -> None:
        """Chain, seal and write ``batch`` (one write, one fsync), then replace the head."""
        if self.last is None:
            self.last = self._resume()
        sealed = self.seal(batch)
        lines: list[bytes] = [b"\n"] if self._torn else []
        lines += [record.line() for record in sealed.records]
        log, head_path = audit_paths(self.folder)
        try:
            append_durably(log, b"".join(lines))
        except FileNotFoundError:
            # The folder is made when first written (or again, if it went): not looked for at every batch.
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            append_durably(log, b"".join(lines))
        self.went_on(sealed)
        self._torn = False
        write_head(head_path, sealed.head)


def move_log(folder: Path, old_scope: str, new_scope: str, key: AuditKey) -> None:
    """The chat's scope changed (its folders moved along): the chain goes on under the new one.

    A ``chat_moved`` record, sealed for the new scope, names the old one; the verifier checks
    the records before it as the old scope's. Blocking; nothing to do without a log.
    """
    if not audit_paths(folder)[0].exists():
        return
    writer = _Writer(old_scope, key, folder)
    writer.last = writer._resume()
    if writer.found:
        writer.append([])  # what the resume found goes first, sealed for the old scope
    writer.scope = new_scope
    writer.append(moved(old_scope))


class AuditLog:
    """The audit log of one chat, as the chat's parts write it: ``record(kind, **fields)``.

    Without a host secret, or without both a folder and ``rows``, it records nothing. Writes run in
    the chat's task group, one batch at a time, in a worker thread (with ``rows``: one transaction
    on the event loop); ``flush`` writes what waits
    at once and waits for it. A batch collects for ``commit_delay`` seconds after its first
    record: one fsync then serves every call of that time, where one each would cost a call
    more than the record itself (the bench ``audit``). A crash loses at most that much.
    """

    def __init__(
        self,
        folder: Path | None,
        scope: str,
        key: AuditKey | None,
        *,
        task_group: TaskGroup,
        redact: Callable[[str], str] = lambda text: text,
        clock: Callable[[], float] = time.time,
        commit_delay: float = COMMIT_DELAY,
        rows: AuditRows | None = None,
    ) -> None:
        """``rows``: the host's database keeps the log (then ``folder`` is not used)."""
        self._writer: _Writer | RowWriter | None = None
        if key is not None and rows is not None:
            self._writer = RowWriter(scope, key, rows)
        elif key is not None and folder is not None:
            self._writer = _Writer(scope, key, folder)
        self._commit_delay = commit_delay
        self._now = anyio.Event()
        self._tg = task_group
        self._redact = redact
        self._clock = clock
        self._pending: Batch = []
        self._flushed: anyio.Event | None = None

    def __repr__(self) -> str:
        return f"AuditLog(enabled={self.enabled})"

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    def record(self, kind: str, **fields: FieldValue) -> None:
        """Add a record; it reaches the disk shortly, in a batch with any other waiting then."""
        if self._writer is None:
            return
        self._pending.append((self._clock(), kind, _checked(kind, fields, self._redact)))
        if self._flushed is None:
            try:
                self._tg.start_soon(self._flush)
            except RuntimeError:
                # The host is past its lifespan (its task group ended): nothing can write now.
                logger.error("an audit record of %s after the host stopped was lost", self._writer.scope)
                self._pending.clear()
                return
            self._flushed = anyio.Event()

    async def _flush(self) -> None:
        assert self._writer is not None
        try:
            while self._pending:
                with anyio.move_on_after(self._commit_delay):
                    await self._now.wait()
                self._now = anyio.Event()
                batch, self._pending = self._pending, []
                await self._write(batch)
        finally:
            done, self._flushed = self._flushed, None
            if done is not None:
                done.set()

    async def _write(self, batch: Batch) -> None:
        writer = self._writer
        assert writer is not None
        if isinstance(writer, RowWriter):
            # Shielded, as the thread is: a batch taken is written, also when the chat closes.
            with anyio.CancelScope(shield=True):
                try:
                    await writer.append(batch)
                except (DatabaseError, AuditRaced) as exc:
                    logger.error("audit records of %s were lost: %s", writer.scope, exc)
            return
        try:
            # Not cancellable: a batch taken is written, also when the chat closes.
            await anyio.to_thread.run_sync(writer.append, batch)
        except OSError as exc:
            logger.error("audit records of %s were lost: %s", writer.scope, exc.strerror)

    async def flush(self) -> None:
        """Wait until every record made so far is on disk (or its loss was logged)."""
        while self._flushed is not None:
            self._now.set()
            await self._flushed.wait()

    async def latest(self, count: int) -> list[tuple[AuditRecord, bool]]:
        """The last ``count`` records of the log, in order, after a flush; each with whether its
        MAC verifies (the whole chain is ``verify_log``'s: ``playa audit verify``)."""
        writer = self._writer
        if writer is None:
            return []
        await self.flush()
        if isinstance(writer, RowWriter):
            return await latest_rows(writer.rows, writer.chat, writer.key, count)
        records = await anyio.to_thread.run_sync(latest_records, audit_paths(writer.folder)[0], count)
        return verified(records, writer.scope, writer.key)
