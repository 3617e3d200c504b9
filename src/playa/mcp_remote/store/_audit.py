"""A chat's audit log: what was done with its servers and tools, append-only and tamper-evident.

The log lives in the chat's private folder (``<data_dir>/sessions/<scope folder>/mcp-remote``),
outside the workspace the agent's file tools are fenced into. It is one JSON record a line::

    {"v": 1, "seq": 7, "time": "2026-12-03T16:11:22.123Z", "kind": "tool_call",
     "fields": {"server": "docs", "tool": "search", "outcome": "ok", ...},
     "prev": "<SHA-256 of record 6>", "mac": "<HMAC-SHA256>"}

Each record carries the hash of the one before it, and a MAC over the chat's scope and every
other field, made with a key derived from the host secret for this purpose alone. So without
the host secret no one can edit a record, delete or reorder records, copy one from another chat
or replay one at another position: the MAC, the sequence or the chain breaks there. Cutting the
tail leaves a valid chain; the head record beside the log (``audit.head.json``: the last
sequence number and hash, sealed the same way) says how far the log went.

A record holds names, counts, sizes, durations and outcomes: never an argument's value, a
result, a token or any other secret. Its text fields pass the chat's redactor all the same.

Appends cost the event loop a list append: the records are built, chained and written in a
worker thread, those of ``COMMIT_DELAY`` in one ``O_APPEND`` write and one fsync, then the head
is rewritten in place.

A chat whose scope changes (a Telegram group upgraded to a supergroup) goes on with its chain:
a ``chat_moved`` record sealed for the new scope names the old one (``move_log``), and the
verifier checks the records before it as the old scope's.

The head is written after the records are durable, and is never fsynced itself: a crash can
only leave it behind the log, which verifies (the records after it follow the chain), never
ahead of it. It is one block of ``HEAD_BYTES``, written whole at offset 0 (a single sector, so
a crash leaves the old head or the new one): a rename and its two fsyncs would triple the cost
of a batch.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, TypeAlias

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from ..._files import append_durably
from ._seal import JSONValue, canonical_json, derive_key
from ._store import private_folder

__all__ = [
    "AUDIT_VERSION",
    "AuditKey",
    "AuditLog",
    "AuditRecord",
    "Break",
    "FieldValue",
    "Verification",
    "audit_folder",
    "audit_paths",
    "move_log",
    "read_records",
    "verify_log",
]

logger = logging.getLogger(__name__)

AUDIT_VERSION: Final = 1
LOG_NAME: Final = "audit.jsonl"
HEAD_NAME: Final = "audit.head.json"
_KEY_INFO: Final = b"playa/mcp-remote/audit/v1"
_KEY_ID_INFO: Final = b"playa/mcp-remote/audit/v1/key-id"
_GENESIS: Final = "0" * 64
_RECORD_FIELDS: Final = frozenset({"v", "seq", "time", "kind", "fields", "prev", "mac"})
_HEAD_FIELDS: Final = frozenset({"v", "kid", "seq", "hash", "mac"})
_NAME_RE: Final = re.compile(r"[a-z][a-z0-9_]{0,39}")
_HEX64_RE: Final = re.compile(r"[0-9a-f]{64}")
_MAX_TEXT: Final = 200
_TAIL_BYTES: Final = 64 * 1024
HEAD_BYTES: Final = 256
COMMIT_DELAY: Final = 0.05
MOVED: Final = "chat_moved"

_SHOWN_FIRST: Final = {name: n for n, name in enumerate(("sender", "server", "tool", "outcome"))}

FieldValue: TypeAlias = "str | int | bool | None"


class AuditKey:
    """The key that seals a host's audit records, derived once from the host secret."""

    __slots__ = ("_key", "key_id")

    def __init__(self, secret: bytes) -> None:
        self._key = derive_key(secret, _KEY_INFO)
        self.key_id = derive_key(secret, _KEY_ID_INFO, 8).hex()

    def __repr__(self) -> str:
        return f"AuditKey(key_id={self.key_id!r})"

    def mac(self, what: str, scope: str, body: Mapping[str, JSONValue]) -> str:
        """The MAC of a record's or the head's ``body``, bound to the chat's ``scope``."""
        # ``what`` keeps a head's MAC from ever passing for a record's, and the other way round.
        message = canonical_json({"v": AUDIT_VERSION, "what": what, "scope": scope, "body": body})
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class AuditRecord:
    """One record of the log, as written."""

    seq: int
    time: str
    kind: str
    fields: Mapping[str, FieldValue]
    prev: str
    mac: str

    def body(self) -> dict[str, JSONValue]:
        """What the MAC covers (with the scope): everything but the MAC."""
        return {
            "seq": self.seq,
            "time": self.time,
            "kind": self.kind,
            "fields": dict(self.fields),
            "prev": self.prev,
        }

    def as_json(self) -> dict[str, JSONValue]:
        return {"v": AUDIT_VERSION, **self.body(), "mac": self.mac}

    def line(self) -> bytes:
        return canonical_json(self.as_json()) + b"\n"

    @property
    def hash(self) -> str:
        """What the next record's ``prev`` holds."""
        return hashlib.sha256(canonical_json(self.as_json())).hexdigest()

    def shown(self) -> str:
        """One line for the owner: the sequence number, the time, the kind and its fields."""
        # Who and what first; the file keeps the fields in canonical (sorted) order.
        names = sorted(self.fields, key=lambda name: (_SHOWN_FIRST.get(name, len(_SHOWN_FIRST)), name))
        parts = " ".join(f"{name}={_shown_value(self.fields[name])}" for name in names)
        return f"#{self.seq} {self.time} {self.kind} {parts}".rstrip()


def _shown_value(value: FieldValue) -> str:
    """A field's value on the owner's line: a text of spaces, line breaks, quotes or invisible
    characters (a server's tool name, say) quoted and escaped, so it cannot pass for more fields
    or another record."""
    if not isinstance(value, str) or (
        value.isascii() and value.isprintable() and not {" ", '"'} & set(value)
    ):
        return str(value)
    quoted = json.dumps(value, ensure_ascii=False)
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in quoted)


def audit_folder(state_dir: Path) -> Path:
    """Where a chat's audit log is kept: the extension's folder in the chat's private folder."""
    return private_folder(state_dir)


def audit_paths(folder: Path) -> tuple[Path, Path]:
    """The log and its head record in the extension's private ``folder``."""
    return folder / LOG_NAME, folder / HEAD_NAME


def _timestamp(now: float) -> str:
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
    return f"{whole}.{int(now % 1 * 1000):03d}Z"


def _checked(kind: str, fields: Mapping[str, object], redact: Callable[[str], str]) -> dict[str, FieldValue]:
    if not _NAME_RE.fullmatch(kind):
        raise ValueError(f"an audit kind is a short lower-case name, not {kind!r}")
    checked: dict[str, FieldValue] = {}
    for name, value in fields.items():
        if not _NAME_RE.fullmatch(name):
            raise ValueError(f"an audit field is a short lower-case name, not {name!r}")
        if isinstance(value, str):
            value = redact(value)
            checked[name] = value if len(value) <= _MAX_TEXT else value[: _MAX_TEXT - 1] + "…"
        elif value is None or isinstance(value, (bool, int)):
            checked[name] = value
        else:
            # Only scalars: a structure is how an argument or a result would slip in.
            raise TypeError(f"audit field {name!r} must be text, a whole number, a boolean or None")
    return checked


# --- reading ---------------------------------------------------------------------------


class _Bad(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _parse_record(line: bytes) -> AuditRecord:
    try:
        raw = json.loads(line)
    except ValueError:
        raise _Bad("is not a record (not JSON)") from None
    if not isinstance(raw, dict) or set(raw) != _RECORD_FIELDS:
        raise _Bad("is not a record (wrong fields)")
    if raw["v"] != AUDIT_VERSION:
        raise _Bad("is in an unknown format")
    seq, when, kind, fields, prev, mac = (raw[k] for k in ("seq", "time", "kind", "fields", "prev", "mac"))
    if type(seq) is not int or seq < 1 or not isinstance(when, str) or not isinstance(kind, str):
        raise _Bad("is not a record (wrong types)")
    if not isinstance(fields, dict) or not all(
        isinstance(v, (str, int, bool)) or v is None for v in fields.values()
    ):
        raise _Bad("is not a record (wrong fields)")
    if not isinstance(prev, str) or not _HEX64_RE.fullmatch(prev) or not isinstance(mac, str):
        raise _Bad("is not a record (wrong chain fields)")
    return AuditRecord(seq, when, kind, fields, prev, mac)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The log's lines, numbered from 1; none when there is no log."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        for number, line in enumerate(file, 1):
            yield number, line.rstrip(b"\n")


def read_records(folder: Path) -> list[AuditRecord]:
    """Every record of the log that parses, in file order (verified or not: see ``verify_log``)."""
    found: list[AuditRecord] = []
    for _, line in _lines(audit_paths(folder)[0]):
        try:
            found.append(_parse_record(line))
        except _Bad:
            continue
    return found


def _latest_records(path: Path, count: int) -> list[AuditRecord]:
    """The last ``count`` records of the log that parse, read from its end (not the whole log)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return []
    with open(fd, "rb") as file:
        end = os.fstat(file.fileno()).st_size
        tail = b""
        while end > 0 and tail.count(b"\n") <= count:
            start = max(0, end - _TAIL_BYTES)
            file.seek(start)
            tail = file.read(end - start) + tail
            end = start
    lines = tail.splitlines()
    if end > 0:
        lines = lines[1:]  # the first may be the end of a longer line
    found: list[AuditRecord] = []
    for line in reversed(lines):
        if len(found) == count:
            break
        try:
            found.append(_parse_record(line))
        except _Bad:
            continue
    return found[::-1]


@dataclass(frozen=True)
class _Head:
    seq: int
    hash: str


def _read_head(path: Path, scope: str, key: AuditKey) -> _Head | str | None:
    """The head record; a text saying why it cannot be trusted; None when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"the head record cannot be read ({exc.strerror})"
    with open(fd, "rb") as file:
        data = file.read(4096)
    try:
        raw = json.loads(data)
    except ValueError:
        return "the head record is not JSON"
    if not isinstance(raw, dict) or set(raw) != _HEAD_FIELDS or raw["v"] != AUDIT_VERSION:
        return "the head record has the wrong fields"
    seq, digest = raw["seq"], raw["hash"]
    if type(seq) is not int or seq < 0 or not isinstance(digest, str) or not isinstance(raw["mac"], str):
        return "the head record has the wrong fields"
    if raw["kid"] != key.key_id:
        return "the head record was sealed with another key (the host secret changed)"
    if not hmac.compare_digest(raw["mac"], key.mac("head", scope, {"seq": seq, "hash": digest})):
        return "the head record does not verify (edited, or copied from another chat)"
    return _Head(seq, digest)


@dataclass(frozen=True)
class Break:
    """Where the chain breaks: the line of the log (0: the head record) and why."""

    line: int
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.why}" if self.line else self.why


@dataclass(frozen=True)
class Verification:
    """What ``verify_log`` found: the records that verify, in order, and every break."""

    records: tuple[AuditRecord, ...] = ()
    breaks: tuple[Break, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.breaks


def _scopes(parsed: list[tuple[int, AuditRecord | _Bad]], scope: str, key: AuditKey) -> list[str]:
    """The scope each record was sealed for: the chat's, and before each move it verifies, the
    one it moved from (a Telegram group upgraded to a supergroup gets a new scope)."""
    scopes: list[str] = []
    for _, record in reversed(parsed):
        scopes.append(scope)
        if (
            isinstance(record, AuditRecord)
            and record.kind == MOVED
            and isinstance(previous := record.fields.get("from"), str)
            and hmac.compare_digest(record.mac, key.mac("record", scope, record.body()))
        ):
            scope = previous
    return scopes[::-1]


def verify_log(folder: Path, scope: str, key: AuditKey) -> Verification:
    """Check the chat's log against its head record: every edit, gap, reordering, replay or cut."""
    log, head_path = audit_paths(folder)
    records: list[AuditRecord] = []
    breaks: list[Break] = []
    last: AuditRecord | None = None
    parsed: list[tuple[int, AuditRecord | _Bad]] = []
    for number, line in _lines(log):
        try:
            parsed.append((number, _parse_record(line)))
        except _Bad as exc:
            parsed.append((number, exc))
    for (number, record), record_scope in zip(parsed, _scopes(parsed, scope, key), strict=True):
        if isinstance(record, _Bad):
            breaks.append(Break(number, f"the line {record.why}"))
            continue
        if not hmac.compare_digest(record.mac, key.mac("record", record_scope, record.body())):
            breaks.append(
                Break(number, f"record {record.seq} does not verify (edited, forged, or from another chat)")
            )
            continue
        expected = 1 if last is None else last.seq + 1
        if record.seq < expected:
            breaks.append(
                Break(
                    number,
                    f"record {record.seq} comes again after record {expected - 1} (replayed or reordered)",
                )
            )
            continue
        if record.seq > expected:
            missing = f"{expected}" if record.seq == expected + 1 else f"{expected} to {record.seq - 1}"
            breaks.append(
                Break(
                    number, f"record {missing} is missing before record {record.seq} (deleted or reordered)"
                )
            )
        elif record.prev != (last.hash if last is not None else _GENESIS):
            breaks.append(
                Break(
                    number,
                    f"record {record.seq} does not follow the record before it (replayed or reordered)",
                )
            )
        records.append(record)
        last = record
    head = _read_head(head_path, scope, key)
    if isinstance(head, str):
        breaks.append(Break(0, head))
    elif head is None:
        if last is not None:
            breaks.append(Break(0, "the head record is missing"))
    elif last is None or last.seq < head.seq:
        ends = f"ends at record {last.seq}" if last is not None else "is empty"
        breaks.append(
            Break(0, f"the log {ends} but its head record says {head.seq} were written (its tail was cut)")
        )
    else:
        at = next((r for r in records if r.seq == head.seq), None)
        if head.seq and (at is None or at.hash != head.hash):
            breaks.append(Break(0, f"record {head.seq} is not the one the head record names"))
    return Verification(tuple(records), tuple(breaks))


# --- writing ---------------------------------------------------------------------------


@dataclass
class _Writer:
    """The chain's end and the files: used by one worker thread at a time."""

    folder: Path
    scope: str
    key: AuditKey
    _last: tuple[int, str] | None = None
    _resumed: list[tuple[str, dict[str, FieldValue]]] = field(default_factory=list)
    _torn: bool = False

    def _resume(self) -> tuple[int, str]:
        """Where the chain goes on: the head's record, or a later one a crash left unnamed."""
        log, head_path = audit_paths(self.folder)
        head = _read_head(head_path, self.scope, self.key)
        tail = self._tail(log)
        if isinstance(head, _Head):
            if tail is not None and tail.seq > head.seq:
                return tail.seq, tail.hash  # appended, and the crash came before the head was
            # Also when the log is shorter than the head says: the chain goes on from the head,
            # so the cut stays visible as a gap.
            return head.seq, head.hash
        if tail is not None:
            # The head is gone or broken while records exist: say so in the chain itself.
            self._resumed.append(("audit_head_lost", {"why": head or "missing", "last_seq": tail.seq}))
            return tail.seq, tail.hash
        return 0, _GENESIS

    def _tail(self, log: Path) -> AuditRecord | None:
        """The log's last record, if it verifies; reads at most the last 64 KiB."""
        try:
            fd = os.open(log, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        with open(fd, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            file.seek(max(0, size - _TAIL_BYTES))
            chunk = file.read()
        self._torn = bool(chunk) and not chunk.endswith(b"\n")  # a crash cut the last append
        for line in reversed(chunk.splitlines()):
            try:
                record = _parse_record(line)
            except _Bad:
                return None
            if hmac.compare_digest(record.mac, self.key.mac("record", self.scope, record.body())):
                return record
            return None
        return None

    def append(self, batch: list[tuple[float, str, dict[str, FieldValue]]]) -> None:
        """Chain, seal and write ``batch`` (one write, one fsync), then replace the head."""
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        if self._last is None:
            self._last = self._resume()
        seq, prev = self._last
        lines: list[bytes] = [b"\n"] if self._torn else []
        entries = [(time.time(), kind, fields) for kind, fields in self._resumed] + batch
        for now, kind, fields in entries:
            seq += 1
            unsealed = AuditRecord(seq, _timestamp(now), kind, fields, prev, "")
            record = replace(unsealed, mac=self.key.mac("record", self.scope, unsealed.body()))
            lines.append(record.line())
            prev = record.hash
        log, head_path = audit_paths(self.folder)
        append_durably(log, b"".join(lines))
        self._last, self._torn, self._resumed = (seq, prev), False, []
        head: dict[str, JSONValue] = {"seq": seq, "hash": prev}
        sealed = {
            "v": AUDIT_VERSION,
            "kid": self.key.key_id,
            **head,
            "mac": self.key.mac("head", self.scope, head),
        }
        _write_head(head_path, canonical_json(sealed))


def move_log(folder: Path, old_scope: str, new_scope: str, key: AuditKey) -> None:
    """The chat's scope changed (its folders moved along): the chain goes on under the new one.

    A ``chat_moved`` record, sealed for the new scope, names the old one; the verifier checks
    the records before it as the old scope's. Blocking; nothing to do without a log.
    """
    if not audit_paths(folder)[0].exists():
        return
    writer = _Writer(folder, old_scope, key)
    writer._last = writer._resume()
    if writer._resumed:
        writer.append([])  # what the resume found goes first, sealed for the old scope
    writer.scope = new_scope
    writer.append([(time.time(), MOVED, {"from": old_scope})])


def _write_head(path: Path, data: bytes) -> None:
    """Overwrite the head in place, padded to ``HEAD_BYTES`` (JSON ignores the trailing spaces)."""
    block = data.ljust(HEAD_BYTES)
    if len(block) != HEAD_BYTES:
        raise ValueError("the head record does not fit its block")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.pwrite(fd, block, 0)
        os.ftruncate(fd, HEAD_BYTES)  # a no-op, unless someone made the file longer
    finally:
        os.close(fd)


class AuditLog:
    """The audit log of one chat, as the chat's parts write it: ``record(kind, **fields)``.

    Without a folder (no host secret, or no private folder) it records nothing. Writes run in
    the chat's task group, one batch at a time, in a worker thread; ``flush`` writes what waits
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
    ) -> None:
        self._writer = _Writer(folder, scope, key) if folder is not None and key is not None else None
        self._commit_delay = commit_delay
        self._now = anyio.Event()
        self._tg = task_group
        self._redact = redact
        self._clock = clock
        self._pending: list[tuple[float, str, dict[str, FieldValue]]] = []
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
                try:
                    # Not cancellable: a batch taken is written, also when the chat closes.
                    await anyio.to_thread.run_sync(self._writer.append, batch)
                except OSError as exc:
                    logger.error("audit records of %s were lost: %s", self._writer.scope, exc.strerror)
        finally:
            done, self._flushed = self._flushed, None
            if done is not None:
                done.set()

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
        records = await anyio.to_thread.run_sync(_latest_records, audit_paths(writer.folder)[0], count)
        scopes = _scopes([(0, record) for record in records], writer.scope, writer.key)
        return [
            (record, hmac.compare_digest(record.mac, writer.key.mac("record", scope, record.body())))
            for record, scope in zip(records, scopes, strict=True)
        ]
