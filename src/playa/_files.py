"""File writes that survive a crash (the one atomic replace every Playa file uses), and reads
straight from a descriptor."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

__all__ = [
    "append_durably",
    "atomic_write",
    "create_durably",
    "fsync_directory",
    "read_at_most",
    "read_whole",
]

_READ_ON = 64 * 1024
"""Bytes asked for at a time past the size the file had (its end is usually the next read)."""


def fsync_directory(folder: Path) -> None:
    """Make the entries of ``folder`` (a rename, a new file) durable."""
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _synced_temp(path: Path, data: bytes, mode: int) -> str:
    """A temporary file beside ``path`` holding ``data``, private then given ``mode``, fsynced."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            os.fchmod(fd, mode)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def atomic_write(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data``: a reader sees the old file or the new one, never half.

    The data goes to a temporary file beside ``path`` (created private, then given ``mode``),
    is fsynced, renamed over ``path``, and the folder is fsynced so the rename is durable.
    Raises ``OSError``; the temporary file is gone whatever happens.
    """
    tmp = _synced_temp(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_directory(path.parent)


def create_durably(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Create ``path`` holding ``data``; ``FileExistsError`` if it exists, and never half-written.

    The data is written to a private temporary file and then hard-linked into place. A link,
    like ``O_EXCL``, fails when the name exists, so two processes cannot both create it; and
    unlike an ``O_EXCL`` create-then-write, no one can ever read a half-written file.
    """
    tmp = _synced_temp(path, data, mode)
    try:
        os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    fsync_directory(path.parent)


def append_durably(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Append ``data`` to ``path`` (created with ``mode`` if missing) and fsync it once.

    A crash can leave the last append torn; a reader must tolerate a partial last record.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        created = os.fstat(fd).st_size == 0
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_directory(path.parent)


def read_at_most(fd: int, limit: int, first: int) -> bytes:
    """Up to ``limit`` bytes of ``fd``, read until its end: ``first`` bytes asked for first (the
    size the file had, and one more to see its end). Straight from the descriptor: a file object
    over a copy of it costs four more system calls, each a wait for the GIL in a worker thread
    while a host opens its chats. A file that grew meanwhile is read on, up to ``limit``."""
    chunks: list[bytes] = []
    read, ask = 0, first
    while read < limit and (chunk := os.read(fd, min(ask, limit - read))):
        chunks.append(chunk)
        read += len(chunk)
        ask = _READ_ON
    return b"".join(chunks)


def read_whole(path: Path, *, at_most: int | None = None) -> bytes:
    """All of the file at ``path``, or its first ``at_most`` bytes: five system calls (four with
    ``at_most``), where ``Path.read_bytes`` makes nine."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if at_most is not None:
            return read_at_most(fd, at_most, at_most)
        return read_at_most(fd, sys.maxsize, os.fstat(fd).st_size + 1)
    finally:
        os.close(fd)
