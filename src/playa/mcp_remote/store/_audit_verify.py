"""The audit log's verifier, wherever the log is kept: its lines (a file) or its rows (a database).

Both keep the same records, chained and MACed alike, and the same sealed head; so one verifier
checks both. The rows are stricter in two ways: a row's sequence number is the record's own (a
row renumbered is a record moved), and the head names the last record exactly, since records
and head are written in one transaction (a file's head may lag behind its log after a crash).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._audit_chain import GENESIS, AuditKey, AuditRecord, BadLine, Head, parse_record, scopes

__all__ = ["Break", "Verification", "verify_chain"]


@dataclass(frozen=True)
class Break:
    """Where the chain breaks: the line of the log, or the row (0: the head record), and why."""

    line: int
    why: str
    unit: str = "line"

    def __str__(self) -> str:
        return f"{self.unit} {self.line}: {self.why}" if self.line else self.why


@dataclass(frozen=True)
class Verification:
    """What ``verify_chain`` found: the records that verify, in order, and every break."""

    records: tuple[AuditRecord, ...] = ()
    breaks: tuple[Break, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.breaks


def _chain_break(record: AuditRecord, last: AuditRecord | None) -> tuple[str, bool] | None:
    """Why a verified record does not follow ``last`` (and whether it is kept all the same), or None."""
    expected = 1 if last is None else last.seq + 1
    if record.seq < expected:
        return f"record {record.seq} comes again after record {expected - 1} (replayed or reordered)", False
    if record.seq > expected:
        missing = f"{expected}" if record.seq == expected + 1 else f"{expected} to {record.seq - 1}"
        return f"record {missing} is missing before record {record.seq} (deleted or reordered)", True
    if record.prev != (last.hash if last is not None else GENESIS):
        return f"record {record.seq} does not follow the record before it (replayed or reordered)", True
    return None


def _head_break(head: Head | str | None, records: list[AuditRecord], *, exact: bool) -> str | None:
    """Why the head record and the verified records disagree (the log was cut), or None."""
    last = records[-1] if records else None
    if isinstance(head, str):
        return head
    if head is None:
        return "the head record is missing" if last is not None else None
    if last is None or last.seq < head.seq:
        ends = f"ends at record {last.seq}" if last is not None else "is empty"
        return f"the log {ends} but its head record says {head.seq} were written (its tail was cut)"
    at = next((r for r in records if r.seq == head.seq), None)
    if head.seq and (at is None or at.hash != head.hash):
        return f"record {head.seq} is not the one the head record names"
    if exact and last.seq > head.seq:
        return (
            f"the log goes on to record {last.seq} but its head record names record {head.seq} "
            "(the head was put back to an earlier one)"
        )
    return None


def verify_chain(
    lines: Sequence[tuple[int, bytes]],
    head: Head | str | None,
    scope: str,
    key: AuditKey,
    *,
    rows: bool = False,
) -> Verification:
    """Check a log, given as its numbered lines (``rows``: its rows by sequence number), against
    its head record: every edit, gap, reordering, replay, cut or rollback."""
    unit = "row" if rows else "line"
    records: list[AuditRecord] = []
    breaks: list[Break] = []
    parsed: list[AuditRecord | BadLine] = []
    for _, line in lines:
        try:
            parsed.append(parse_record(line))
        except BadLine as exc:
            parsed.append(exc)
    for (number, _), record, record_scope in zip(lines, parsed, scopes(parsed, scope, key), strict=True):
        if isinstance(record, BadLine):
            breaks.append(Break(number, f"the {unit} {record.why}", unit))
            continue
        if not record.verifies(key, record_scope):
            why = f"record {record.seq} does not verify (edited, forged, or from another chat)"
            breaks.append(Break(number, why, unit))
            continue
        if rows and record.seq != number:
            breaks.append(Break(number, f"the row holds record {record.seq} (renumbered)", unit))
            continue
        if (found := _chain_break(record, records[-1] if records else None)) is not None:
            why, kept = found
            breaks.append(Break(number, why, unit))
            if not kept:
                continue
        records.append(record)
    if (cut := _head_break(head, records, exact=rows)) is not None:
        breaks.append(Break(0, cut, unit))
    return Verification(tuple(records), tuple(breaks))
