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

import itertools
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from ._audit_chain import AuditKey, AuditRecord, Head, good_records, open_head
from ._audit_verify import Break, Verification, verify_chain
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
    "replace_log",
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
    return list(good_records(line for _, line in _lines(audit_paths(folder)[0])))


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
    return list(itertools.islice(good_records(reversed(lines)), count))[::-1]


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


def verify_log(folder: Path, scope: str, key: AuditKey) -> Verification:
    """Check the chat's log against its head record: every edit, gap, reordering, replay or cut."""
    log, head_path = audit_paths(folder)
    return verify_chain(list(_lines(log)), read_head(head_path, scope, key), scope, key)


def replace_log(folder: Path, records: Sequence[AuditRecord], head: bytes) -> None:
    """Make the log in ``folder`` ``records`` and its head ``head`` (``playa db export``: a log
    verified elsewhere). The log is written beside and renamed over the old one, then the head."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    log, head_path = audit_paths(folder)
    partial = log.with_name(log.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    with open(fd, "wb") as file:
        file.write(b"".join(record.line() for record in records))
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, log)
    write_head(head_path, head)
