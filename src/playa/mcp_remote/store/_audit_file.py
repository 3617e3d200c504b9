"""The audit log's files: the log and its head beside it, how they are read, written and verified.

The log lives in the chat's private folder (``<data_dir>/sessions/<scope folder>/mcp-remote``),
outside the workspace the agent's file tools are fenced into: one JSON record a line, appended;
``audit.head.json`` beside it. Cutting the tail leaves a valid chain; the head says how far the
log went, so ``verify_log`` sees the cut.

The head is written after the records are durable, and is never fsynced itself: a crash can
only leave it behind the log, which verifies (the records after it follow the chain), never
ahead of it. It is one block of ``HEAD_BYTES``, written whole at offset 0 (a single sector, so
a crash leaves the old head or the new one): a rename and its two fsyncs would triple the cost
of a batch.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ._audit_chain import GENESIS, AuditKey, AuditRecord, BadLine, Head, open_head, parse_record, scopes
from ._server_file import private_folder

__all__ = [
    "HEAD_BYTES",
    "Break",
    "Verification",
    "audit_folder",
    "audit_paths",
    "latest_records",
    "read_head",
    "read_records",
    "tail_of",
    "verify_log",
    "write_head",
]

LOG_NAME: Final = "audit.jsonl"
HEAD_NAME: Final = "audit.head.json"
HEAD_BYTES: Final = 256
_TAIL_BYTES: Final = 64 * 1024


def audit_folder(state_dir: Path) -> Path:
    """Where a chat's audit log is kept: the extension's folder in the chat's private folder."""
    return private_folder(state_dir)


def audit_paths(folder: Path) -> tuple[Path, Path]:
    """The log and its head record in the extension's private ``folder``."""
    return folder / LOG_NAME, folder / HEAD_NAME


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
            found.append(parse_record(line))
        except BadLine:
            continue
    return found


def latest_records(path: Path, count: int) -> list[AuditRecord]:
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
            found.append(parse_record(line))
        except BadLine:
            continue
    return found[::-1]


def read_head(path: Path, scope: str, key: AuditKey) -> Head | str | None:
    """The head record; a text saying why it cannot be trusted; None when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"the head record cannot be read ({exc.strerror})"
    with open(fd, "rb") as file:
        data = file.read(4096)
    return open_head(data, scope, key)


def tail_of(log: Path) -> tuple[bytes, bool]:
    """The log's last 64 KiB at most, and whether a crash cut its last append (no final newline)."""
    try:
        fd = os.open(log, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return b"", False
    with open(fd, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        file.seek(max(0, size - _TAIL_BYTES))
        chunk = file.read()
    return chunk, bool(chunk) and not chunk.endswith(b"\n")


def write_head(path: Path, data: bytes) -> None:
    """Overwrite the head in place, padded to ``HEAD_BYTES`` (JSON ignores the trailing spaces)."""
    block = data.ljust(HEAD_BYTES)
    if len(block) != HEAD_BYTES:
        raise ValueError("the head record does not fit its block")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        os.pwrite(fd, block, 0)
        if info.st_size > HEAD_BYTES:
            os.ftruncate(fd, HEAD_BYTES)  # someone made the file longer
    finally:
        os.close(fd)


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


def _head_break(head: Head | str | None, records: list[AuditRecord]) -> str | None:
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
    return None


def verify_log(folder: Path, scope: str, key: AuditKey) -> Verification:
    """Check the chat's log against its head record: every edit, gap, reordering, replay or cut."""
    log, head_path = audit_paths(folder)
    records: list[AuditRecord] = []
    breaks: list[Break] = []
    numbers: list[int] = []
    parsed: list[AuditRecord | BadLine] = []
    for number, line in _lines(log):
        numbers.append(number)
        try:
            parsed.append(parse_record(line))
        except BadLine as exc:
            parsed.append(exc)
    for number, record, record_scope in zip(numbers, parsed, scopes(parsed, scope, key), strict=True):
        if isinstance(record, BadLine):
            breaks.append(Break(number, f"the line {record.why}"))
            continue
        if not record.verifies(key, record_scope):
            breaks.append(
                Break(number, f"record {record.seq} does not verify (edited, forged, or from another chat)")
            )
            continue
        if (found := _chain_break(record, records[-1] if records else None)) is not None:
            why, kept = found
            breaks.append(Break(number, why))
            if not kept:
                continue
        records.append(record)
    if (cut := _head_break(read_head(head_path, scope, key), records)) is not None:
        breaks.append(Break(0, cut))
    return Verification(tuple(records), tuple(breaks))
