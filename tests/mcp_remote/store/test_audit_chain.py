"""A record as the writer seals it is the record the verifier reads: the same bytes, the same MAC.

The writer puts a record's line and its MAC's message together from one encoding of each value
(``chained``); the verifier encodes the whole record (``canonical_json``). Any difference would
make every record of a log fail verification, so the two are held to the same bytes here, over
values that need escaping.
"""

from __future__ import annotations

import hashlib
import hmac

import pytest

from playa.mcp_remote import AuditKey
from playa.mcp_remote.store import canonical_json
from playa.mcp_remote.store._audit_chain import (
    AUDIT_VERSION,
    GENESIS,
    ChainEnd,
    chained,
    chains_to,
    good_records,
    parse_record,
)
from playa.mcp_remote.store._seal import derive_key

KEY = AuditKey(b"k" * 32)
MAC_KEY = derive_key(b"k" * 32, b"playa/mcp-remote/audit/v1")
"""What the records' MACs are made with: the key derived for this purpose alone."""

FIELDS: list[dict[str, str | int | bool | None]] = [
    {},
    {"server": "docs", "tool": "search", "outcome": "ok", "duration_us": 1234, "arguments_bytes": 0},
    {"sender": None, "refused": True, "read_only": False, "count": -7, "big": 10**30},
    {"tool": 'quote " backslash \\ slash / tab \t line\nbreak', "server": "é ü 中文 🙂", "z": "\x00\x1f\x7f"},
    {"name": "\u2028\u2029\ufeff\U000e0041", "b": "", "a": "order"},
]


@pytest.mark.parametrize("fields", FIELDS)
@pytest.mark.parametrize("scope", ["console:local", 'telegram:-100123 "quoted" é'])
def test_a_sealed_record_is_its_canonical_encoding_and_verifies(
    fields: dict[str, str | int | bool | None], scope: str
) -> None:
    prev = hashlib.sha256(b"before").hexdigest()
    record = chained(42, prev, "2026-12-03T16:11:22.123Z", "tool_call", fields, scope, KEY)

    assert record.line() == canonical_json(record.as_json()) + b"\n"
    message = canonical_json({"v": AUDIT_VERSION, "what": "record", "scope": scope, "body": record.body()})
    assert record.mac == hmac.new(MAC_KEY, message, hashlib.sha256).hexdigest()
    assert record.verifies(KEY, scope)
    assert not record.verifies(KEY, scope + "x")
    assert parse_record(record.line().rstrip(b"\n")) == record
    assert record.hash == hashlib.sha256(canonical_json(record.as_json())).hexdigest()


def test_the_first_record_chains_to_genesis_and_another_key_does_not_verify_it() -> None:
    record = chained(1, GENESIS, "2026-12-03T16:11:22.000Z", "server_added", {"server": "a"}, "s", KEY)
    assert record.prev == GENESIS and record.verifies(KEY, "s")
    assert not record.verifies(AuditKey(b"o" * 32), "s")


def test_bad_lines_are_passed_over_and_what_follows_one_chains_to_its_bytes() -> None:
    first = chained(1, GENESIS, "2026-12-03T16:11:22.000Z", "server_added", {"server": "a"}, "s", KEY)
    second = chained(2, first.hash, "2026-12-03T16:11:23.000Z", "tool_call", {"tool": "t"}, "s", KEY)
    lines = [b"not json", first.line().rstrip(b"\n"), b'{"v": 1}', b"", second.line().rstrip(b"\n")]

    assert list(good_records(lines)) == [first, second]
    assert list(good_records(reversed(lines))) == [second, first]
    assert chains_to(first.line().rstrip(b"\n")) == first.hash == second.prev
    assert chains_to(b"not json") == hashlib.sha256(b"not json").hexdigest()


def test_a_chain_end_says_a_lost_head_first_then_the_batch_and_forgets_it_once_written() -> None:
    end = ChainEnd("s", KEY)
    with pytest.raises(RuntimeError, match="resumed"):
        end.seal([])
    end.last = (4, hashlib.sha256(b"four").hexdigest())
    end.head_lost("missing", 4)

    sealed = end.seal([(0.0, "tool_call", {"tool": "t"})])
    assert [(r.seq, r.kind, dict(r.fields)) for r in sealed.records] == [
        (5, "audit_head_lost", {"why": "missing", "last_seq": 4}),
        (6, "tool_call", {"tool": "t"}),
    ]
    assert sealed.records[0].prev == end.last[1] and sealed.last == (6, sealed.records[1].hash)
    assert all(record.verifies(KEY, "s") for record in sealed.records)
    assert end.last == (4, hashlib.sha256(b"four").hexdigest())  # not moved until written

    end.went_on(sealed)
    assert end.last == sealed.last and end.found == []
    assert end.seal([]).records == [] and end.seal([]).last == sealed.last
