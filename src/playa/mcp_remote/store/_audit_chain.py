"""The audit log's chain: records, their MACs and the head, independent of where they are kept.

Each record carries the hash of the one before it, and a MAC over the chat's scope and every
other field, made with a key derived from the host secret for this purpose alone. So without
the host secret no one can edit a record, delete or reorder records, copy one from another chat
or replay one at another position: the MAC, the sequence or the chain breaks there. The head
(the last sequence number and hash, sealed the same way) says how far the log went.

A chat whose scope changes goes on with its chain: a ``chat_moved`` record sealed for the new
scope names the old one, and the records before it are checked as the old scope's (``scopes``).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Final, TypeAlias

from ._seal import JSONValue, canonical_json, derive_key

__all__ = [
    "AUDIT_VERSION",
    "GENESIS",
    "HEAD_LOST",
    "MOVED",
    "AuditKey",
    "AuditRecord",
    "BadLine",
    "Batch",
    "ChainEnd",
    "FieldValue",
    "Head",
    "SealedBatch",
    "chain",
    "chained",
    "chains_to",
    "good_records",
    "moved",
    "open_head",
    "parse_record",
    "scopes",
    "sealed_head",
    "timestamp",
    "verified",
]

AUDIT_VERSION: Final = 1
_KEY_INFO: Final = b"playa/mcp-remote/audit/v1"
_KEY_ID_INFO: Final = b"playa/mcp-remote/audit/v1/key-id"
GENESIS: Final = "0" * 64
"""What the first record's ``prev`` holds."""
_RECORD_FIELDS: Final = frozenset({"v", "seq", "time", "kind", "fields", "prev", "mac"})
_HEAD_FIELDS: Final = frozenset({"v", "kid", "seq", "hash", "mac"})
_HEX64_RE: Final = re.compile(r"[0-9a-f]{64}")
MOVED: Final = "chat_moved"
HEAD_LOST: Final = "audit_head_lost"

_SHOWN_FIRST: Final = {name: n for n, name in enumerate(("sender", "server", "tool", "outcome"))}

FieldValue: TypeAlias = "str | int | bool | None"
Batch: TypeAlias = "list[tuple[float, str, dict[str, FieldValue]]]"
"""Records to be, in order: each one's time, kind and fields."""


class AuditKey:
    """The key that seals a host's audit records, derived once from the host secret."""

    __slots__ = ("_keyed", "key_id")

    def __init__(self, secret: bytes) -> None:
        self._keyed = hmac.new(derive_key(secret, _KEY_INFO), digestmod=hashlib.sha256)
        """The HMAC with the key taken in: each MAC starts from a copy (the writer makes one a record)."""
        self.key_id = derive_key(secret, _KEY_ID_INFO, 8).hex()

    def __repr__(self) -> str:
        return f"AuditKey(key_id={self.key_id!r})"

    def mac(self, what: str, scope: str, body: Mapping[str, JSONValue]) -> str:
        """The MAC of a record's or the head's ``body``, bound to the chat's ``scope``."""
        # ``what`` keeps a head's MAC from ever passing for a record's, and the other way round.
        message = canonical_json({"v": AUDIT_VERSION, "what": what, "scope": scope, "body": body})
        return self._mac(message)

    def _mac(self, message: bytes) -> str:
        mac = self._keyed.copy()
        mac.update(message)
        return mac.hexdigest()


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

    @functools.cached_property
    def _encoded(self) -> bytes:
        # Encoded once: the writer takes both the line and the hash of every record.
        return canonical_json(self.as_json())

    def line(self) -> bytes:
        return self._encoded + b"\n"

    @property
    def hash(self) -> str:
        """What the next record's ``prev`` holds."""
        return hashlib.sha256(self._encoded).hexdigest()

    def shown(self) -> str:
        """One line for the owner: the sequence number, the time, the kind and its fields."""
        # Who and what first; the file keeps the fields in canonical (sorted) order.
        names = sorted(self.fields, key=lambda name: (_SHOWN_FIRST.get(name, len(_SHOWN_FIRST)), name))
        parts = " ".join(f"{name}={_shown_value(self.fields[name])}" for name in names)
        return f"#{self.seq} {self.time} {self.kind} {parts}".rstrip()

    def verifies(self, key: AuditKey, scope: str) -> bool:
        """Whether its MAC is the one ``key`` makes for it in ``scope``."""
        return hmac.compare_digest(self.mac, key.mac("record", scope, self.body()))


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


def chained(
    seq: int, prev: str, time: str, kind: str, fields: dict[str, FieldValue], scope: str, key: AuditKey
) -> AuditRecord:
    """The record ``seq`` after the one whose hash is ``prev``, sealed for ``scope``.

    The writer seals every record a call makes, so the record's canonical encoding and its MAC's
    message are put together from one encoding of each value rather than two of the whole
    (``canonical_json`` sorts keys; these are listed in that order). ``verifies`` and the
    verifier check them the long way, and a test holds the two to the same bytes.
    """
    f, k, p, t = canonical_json(fields), _string(kind), _string(prev), _string(time)
    body = b'{"fields":%s,"kind":%s,"prev":%s,"seq":%d,"time":%s}' % (f, k, p, seq, t)
    mac = key._mac(b'{"body":%s,"scope":%s,"v":%d,"what":"record"}' % (body, _string(scope), AUDIT_VERSION))
    record = AuditRecord(seq, time, kind, fields, prev, mac)
    line = b'{"fields":%s,"kind":%s,"mac":"%s","prev":%s,"seq":%d,"time":%s,"v":%d}'
    # The cached encoding, as ``_encoded`` would make it.
    record.__dict__["_encoded"] = line % (f, k, mac.encode("ascii"), p, seq, t, AUDIT_VERSION)
    return record


def chain(
    last: tuple[int, str],
    entries: Iterable[tuple[float, str, dict[str, FieldValue]]],
    scope: str,
    key: AuditKey,
) -> list[AuditRecord]:
    """``entries`` (time, kind, fields) as the records after ``last`` (its seq and hash), sealed for ``scope``."""
    seq, prev = last
    records: list[AuditRecord] = []
    for now, kind, fields in entries:
        seq += 1
        record = chained(seq, prev, timestamp(now), kind, fields, scope, key)
        records.append(record)
        prev = record.hash
    return records


def _string(text: str) -> bytes:
    """A text as ``canonical_json`` encodes it (ASCII, JSON escapes)."""
    return encode_basestring_ascii(text).encode("ascii")


class BadLine(Exception):
    """A line of the log that is no record; ``why`` completes "the line …"."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def parse_record(line: bytes) -> AuditRecord:
    try:
        raw = json.loads(line)
    except ValueError:
        raise BadLine("is not a record (not JSON)") from None
    if not isinstance(raw, dict) or set(raw) != _RECORD_FIELDS:
        raise BadLine("is not a record (wrong fields)")
    if raw["v"] != AUDIT_VERSION:
        raise BadLine("is in an unknown format")
    seq, when, kind, fields, prev, mac = (raw[k] for k in ("seq", "time", "kind", "fields", "prev", "mac"))
    if type(seq) is not int or seq < 1 or not isinstance(when, str) or not isinstance(kind, str):
        raise BadLine("is not a record (wrong types)")
    if not isinstance(fields, dict) or not all(
        isinstance(v, (str, int, bool)) or v is None for v in fields.values()
    ):
        raise BadLine("is not a record (wrong fields)")
    if not isinstance(prev, str) or not _HEX64_RE.fullmatch(prev) or not isinstance(mac, str):
        raise BadLine("is not a record (wrong chain fields)")
    return AuditRecord(seq, when, kind, fields, prev, mac)


def good_records(lines: Iterable[bytes]) -> Iterator[AuditRecord]:
    """The records of ``lines`` that parse, in order: a line that does not is passed over."""
    for line in lines:
        try:
            yield parse_record(line)
        except BadLine:
            continue


def chains_to(line: bytes) -> str:
    """What the record after ``line`` holds as ``prev``: its record's hash, or the line's own
    SHA-256 when it is no record."""
    try:
        return parse_record(line).hash
    except BadLine:
        return hashlib.sha256(line).hexdigest()


@dataclass(frozen=True)
class Head:
    """How far the log went: the last record's sequence number and hash."""

    seq: int
    hash: str


def sealed_head(head: Head, scope: str, key: AuditKey) -> bytes:
    """The head as written beside the log, sealed for ``scope``."""
    body: dict[str, JSONValue] = {"seq": head.seq, "hash": head.hash}
    return canonical_json(
        {"v": AUDIT_VERSION, "kid": key.key_id, **body, "mac": key.mac("head", scope, body)}
    )


@dataclass(frozen=True)
class SealedBatch:
    """A batch chained and sealed: its records, where the chain now ends, and the head naming that end."""

    records: list[AuditRecord]
    last: tuple[int, str]
    head: bytes


@dataclass
class ChainEnd:
    """Where one writer's chain goes on (the file's and the rows'): its last record, seq and hash,
    once resumed; and what the resume found to say before the next batch (a head lost)."""

    scope: str
    key: AuditKey
    last: tuple[int, str] | None = field(default=None, init=False)
    found: list[tuple[str, dict[str, FieldValue]]] = field(default_factory=list, init=False)

    def head_lost(self, why: str, last_seq: int) -> None:
        """Say in the chain itself, before the next batch, that the head was lost or went back."""
        self.found.append((HEAD_LOST, {"why": why, "last_seq": last_seq}))

    def seal(self, batch: Batch) -> SealedBatch:
        """The records after the last one, sealed for the scope: first what the resume found
        (timed now), then ``batch``; and the head naming the last of them (the last record itself
        when there are none)."""
        if self.last is None:
            raise RuntimeError("a chain is sealed on only once resumed")
        entries = [(time.time(), kind, fields) for kind, fields in self.found]
        records = chain(self.last, [*entries, *batch], self.scope, self.key)
        end = (records[-1].seq, records[-1].hash) if records else self.last
        return SealedBatch(records, end, sealed_head(Head(*end), self.scope, self.key))

    def went_on(self, sealed: SealedBatch) -> None:
        """``sealed`` is written: the chain ends at its last record, and what was found is said."""
        self.last, self.found = sealed.last, []


def open_head(data: bytes, scope: str, key: AuditKey) -> Head | str:
    """The head written as ``data``, or a text saying why it cannot be trusted."""
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
    return Head(seq, digest)


def moved(old_scope: str) -> Batch:
    """What a chat's chain says first under its new scope: a ``chat_moved`` record naming the old
    one, which ``scopes`` follows back."""
    return [(time.time(), MOVED, {"from": old_scope})]


def scopes(records: Sequence[AuditRecord | BadLine], scope: str, key: AuditKey) -> list[str]:
    """The scope each record was sealed for: the chat's, and before each move it verifies, the
    one it moved from (a Telegram group upgraded to a supergroup gets a new scope)."""
    found: list[str] = []
    for record in reversed(records):
        found.append(scope)
        if (
            isinstance(record, AuditRecord)
            and record.kind == MOVED
            and isinstance(previous := record.fields.get("from"), str)
            and record.verifies(key, scope)
        ):
            scope = previous
    return found[::-1]


def verified(records: Sequence[AuditRecord], scope: str, key: AuditKey) -> list[tuple[AuditRecord, bool]]:
    """Each of a chat's last records with whether its MAC verifies for the scope it was sealed for."""
    sealed_for = scopes(records, scope, key)
    return [(record, record.verifies(key, s)) for record, s in zip(records, sealed_for, strict=True)]


def timestamp(now: float) -> str:
    """A record's time: UTC, to the millisecond."""
    return f"{_second(int(now))}.{int(now % 1 * 1000):03d}Z"


@functools.lru_cache(maxsize=4)
def _second(whole: int) -> str:
    """A second's text: the records of a batch mostly share it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
