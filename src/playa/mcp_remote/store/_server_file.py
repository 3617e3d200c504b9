"""The server file on disk: where it lives, how it is read and written, and its rollback record.

Nothing in the file is trusted until its seals open (``_entry_seal``); this module guards the
file itself. Reads refuse links, FIFOs, devices and oversized files (``O_NOFOLLOW`` + fstat)
and a ``.volcanic/mcp`` folder that leads elsewhere; a parsed document with a repeated key is
unusable. Writes are atomic, with a directory fsync.

Rollback and deletion. Seals prove each entry, not the file: a writer could put back an older
file (a removed server, an old key) or delete it. So with a ``state_dir`` (the chat's private
folder, outside the workspace) the store keeps there a copy of the file it wrote last and a
record of it (its generation, which the file carries too, its SHA-256 and its number of
entries). A file the record does not name, or a missing file when entries existed, is refused
as a whole; the copy can be put back, and an owner's write starts from the copy. Without a
record yet (first run, or an older Playa's file), the file is read as before.

Concurrent writers. Every write is a read-modify-write under an exclusive ``flock`` on a lock
file in that private folder, and every read takes it shared, so processes sharing a data dir
neither lose an entry nor see a file and a record from two different writes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..._files import atomic_write, read_at_most, read_whole
from ...exceptions import StoreError

__all__ = [
    "MAX_FILE_BYTES",
    "RESTORE_HINT",
    "STORE_VERSION",
    "FileSignature",
    "Record",
    "ServerFile",
    "Unreadable",
    "count",
    "parse_document",
    "private_folder",
    "refusal",
    "store_path",
]

STORE_VERSION: Final = 1
MAX_FILE_BYTES: Final = 4 * 1024 * 1024
_RELATIVE_PATH: Final = Path(".volcanic", "mcp", "servers.json")
_ASIDE_NAME: Final = "servers.json.unreadable"
_MAX_ASIDE: Final = 100
# In the chat's private folder (outside the workspace): the lock every write takes, a copy of
# the file last written, and the record of it (generation, digest, number of entries).
_PRIVATE_FOLDER: Final = "mcp-remote"
_LOCK_NAME: Final = "servers.lock"
_COPY_NAME: Final = "servers.json"
_RECORD_NAME: Final = "servers.record.json"
RESTORE_HINT: Final = "the owner can put back the copy Playa saved last with /mcp_restore"


def private_folder(state_dir: Path) -> Path:
    """The extension's folder in a chat's private state folder (outside the workspace)."""
    return state_dir / _PRIVATE_FOLDER


def store_path(workspace: Path) -> Path:
    """Where a workspace keeps its sealed server file."""
    return workspace / _RELATIVE_PATH


@dataclass(frozen=True)
class FileSignature:
    """Cheap identity of the file's state: it changes whenever the file is written or replaced."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    error: int = 0
    """The errno when the file could not even be stat'ed (other than missing)."""


class _JSONObject(dict[str, object]):
    """A parsed JSON object that remembers whether the text repeated a key."""

    repeated = False


def _object_pairs(pairs: list[tuple[str, object]]) -> _JSONObject:
    obj = _JSONObject(pairs)
    if len(obj) != len(pairs):
        obj.repeated = True
    return obj


def _refuse_constant(token: str) -> object:
    raise ValueError(f"{token} is not allowed")


def _parse_float(text: str) -> float:
    value = float(text)
    # 1e999 parses as inf, which json.dumps could not write back when the entry is kept.
    if value in (float("inf"), float("-inf")):
        raise ValueError("number out of range")
    return value


class Unreadable(Exception):
    """The file exists but cannot be used at all (becomes a warning or a ``StoreError``)."""

    def __init__(self, warning: str, *, movable: bool) -> None:
        super().__init__(warning)
        self.warning = warning
        # True when an owner's write may set the file aside and start over (whatever is in the
        # way: bad bytes, a newer format, a folder or FIFO, a file it cannot read); False when
        # the folder itself leads elsewhere, where no write may go.
        self.movable = movable


@dataclass(frozen=True)
class Record:
    """What the store wrote last, kept outside the workspace: the rollback and deletion check."""

    generation: int
    digest: str
    entries: int

    def encode(self) -> bytes:
        fields = {"version": 1, "generation": self.generation, "digest": self.digest, "entries": self.entries}
        return json.dumps(fields).encode("ascii")

    @classmethod
    def decode(cls, data: bytes) -> Record | None:
        # Only this store writes it, outside every workspace; a damaged one counts as none.
        try:
            fields = json.loads(data)
            record = cls(int(fields["generation"]), str(fields["digest"]), int(fields["entries"]))
        except (ValueError, TypeError, KeyError):
            return None
        return record


def count(n: int) -> str:
    """A number of entries, in words."""
    return "1 entry" if n == 1 else f"{n} entries"


def refusal(record: Record, data: bytes | None) -> str | None:
    """Why a file is not the one the record names (count only: no name is shown), or None."""
    rel = _RELATIVE_PATH.as_posix()
    if data is None:
        if record.entries == 0:
            return None
        return f"{rel} is missing, but Playa saved {count(record.entries)} in it last; {RESTORE_HINT}"
    if hashlib.sha256(data).hexdigest() == record.digest:
        return None
    try:
        doc = json.loads(data)
        generation = doc.get("generation") if isinstance(doc, dict) else None
        servers = doc.get("servers") if isinstance(doc, dict) else None
    except (ValueError, RecursionError):
        generation, servers = None, None
    older = type(generation) is int and generation < record.generation
    what = "an older copy of the file Playa saved" if older else "not the file Playa saved last"
    held = f" ({count(len(servers))})" if isinstance(servers, list) else ""
    return f"{rel} is {what}, so it is not used{held}; {RESTORE_HINT}"


def parse_document(data: bytes, rel: str = _RELATIVE_PATH.as_posix()) -> list[object]:
    """The raw ``servers`` of a file's bytes (``rel`` names it in warnings); raises ``Unreadable``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable(f"{rel} is not UTF-8 text", movable=True) from None
    try:
        doc = json.loads(
            text, object_pairs_hook=_object_pairs, parse_constant=_refuse_constant, parse_float=_parse_float
        )
    except json.JSONDecodeError as exc:
        raise Unreadable(f"{rel} is not valid JSON ({exc.msg}, line {exc.lineno})", movable=True) from None
    except (ValueError, RecursionError):
        raise Unreadable(f"{rel} is not valid JSON", movable=True) from None
    if not isinstance(doc, dict):
        raise Unreadable(f"{rel} is not a JSON object", movable=True)
    if getattr(doc, "repeated", False):
        raise Unreadable(f"{rel} repeats a top-level key", movable=True)
    version = doc.get("version")
    if type(version) is not int:
        raise Unreadable(f"{rel} has no format version", movable=True)
    if version != STORE_VERSION:
        # Set aside, never overwritten, by an owner's write: a newer Playa may have written it.
        raise Unreadable(
            f"{rel} has unknown format version; this Playa reads version {STORE_VERSION}", movable=True
        )
    servers = doc.get("servers")
    if not isinstance(servers, list):
        raise Unreadable(f"{rel} has no 'servers' list", movable=True)
    return servers


def _atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old file or the new one, never half."""
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise StoreError(f"cannot write {_RELATIVE_PATH.as_posix()}: {exc.strerror}") from None


_RECORD_LIMIT: Final = 4096
"""Bytes of the private record read at the most (it holds a generation, a count and a digest)."""


def _real_folders(*paths: Path) -> bool:
    """Whether each of ``paths`` is a folder itself, not a link to one (nor anything else)."""
    try:
        return all(stat.S_ISDIR(os.lstat(path).st_mode) for path in paths)
    except OSError:
        return False


class ServerFile:
    """One chat's server file, with its lock, its copy and its record in the private folder.

    Knows bytes and raw JSON entries, never seals: ``ServerStore`` opens and seals the entries.
    """

    def __init__(self, workspace: Path, state_dir: Path | None) -> None:
        self._workspace = workspace
        self.path = store_path(workspace)
        self._private = None if state_dir is None else private_folder(state_dir)

    @functools.cached_property
    def _expected_folder(self) -> Path:
        """Where ``.volcanic/mcp`` must lead: inside the workspace, which the agent cannot move."""
        return Path(os.path.realpath(self._workspace)) / _RELATIVE_PATH.parent

    @property
    def keeps_copy(self) -> bool:
        """Whether there is a private folder for the copy and the record."""
        return self._private is not None

    def signature(self) -> FileSignature | None:
        """The file's current signature (one ``lstat``); None when there is no file."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return FileSignature(0, 0, 0, 0, 0, error=exc.errno or -1)
        return FileSignature(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    # --- reading -----------------------------------------------------------------------

    def read_bytes(self) -> bytes | None:
        """The file's bytes, None when there is no file; raises ``Unreadable``."""
        rel = _RELATIVE_PATH.as_posix()
        self.check_folder(create=False)
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Unreadable(f"{rel} is a symbolic link; it is ignored", movable=True) from None
            raise Unreadable(f"cannot read {rel}: {exc.strerror}", movable=True) from None
        try:
            # O_NONBLOCK and this check keep a FIFO or device planted by the agent from
            # blocking the chat; a directory can be opened on Linux, so it lands here too.
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise Unreadable(f"{rel} is not a regular file", movable=True)
            if st.st_size > MAX_FILE_BYTES:
                raise Unreadable(f"{rel} is larger than {MAX_FILE_BYTES // 2**20} MiB", movable=True)
            data = read_at_most(fd, MAX_FILE_BYTES + 1, st.st_size + 1)
        except OSError as exc:
            raise Unreadable(f"cannot read {rel}: {exc.strerror}", movable=True) from None
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_BYTES:
            raise Unreadable(f"{rel} is larger than {MAX_FILE_BYTES // 2**20} MiB", movable=True)
        return data

    def check_folder(self, *, create: bool) -> None:
        """Refuse a ``.volcanic/mcp`` folder that is a link leading elsewhere.

        Otherwise the agent could point this chat's folder at another chat's, and our writes
        would replace that chat's file.
        """
        folder = self.path.parent
        if create:
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create {_RELATIVE_PATH.parent.as_posix()}: {exc.strerror}"
                ) from None
        if _real_folders(folder.parent, folder):
            # Neither is a link: the folder is where the workspace puts it. Two ``lstat`` calls
            # rather than resolving both paths, a dozen more, each a wait for the GIL in a worker
            # thread while a host opens its chats.
            return
        if folder.exists() and Path(os.path.realpath(folder)) != self._expected_folder:
            message = f"{_RELATIVE_PATH.parent.as_posix()} is a link to another folder; it is ignored"
            if create:
                raise StoreError(message)
            raise Unreadable(message, movable=False)

    # --- writing -----------------------------------------------------------------------

    def set_aside(self, problem: Unreadable | None) -> str:
        """Move what is in the file's place aside (never delete it); say so for the reply."""
        rel = _RELATIVE_PATH.as_posix()
        if problem is not None and not problem.movable:
            raise StoreError(problem.warning)
        why = problem.warning if problem is not None else f"{rel} was not the file Playa saved last"
        for n in range(1, _MAX_ASIDE + 1):
            aside = self.path.with_name(_ASIDE_NAME if n == 1 else f"{_ASIDE_NAME}.{n}")
            if not os.path.lexists(aside):
                break
        else:
            raise StoreError(f"{why}, and there are too many files set aside already; remove some")
        try:
            os.rename(self.path, aside)
        except OSError as err:
            raise StoreError(f"{why}, and it cannot be moved aside: {err.strerror}") from None
        return f"{why}; I moved it aside to {_RELATIVE_PATH.parent.as_posix()}/{aside.name}"

    def put_back(self, copy: bytes) -> None:
        """Write the saved copy in the file's place (the record names it already)."""
        self.check_folder(create=True)
        _atomic_write(self.path, copy)

    def write(self, servers: list[object], generation: int) -> None:
        """Write ``servers`` as the file's ``generation``, with its copy and record when kept."""
        self.check_folder(create=True)
        try:
            text = json.dumps(
                {"version": STORE_VERSION, "generation": generation, "servers": servers},
                indent=2,
                ensure_ascii=True,
                allow_nan=False,
            )
        except (ValueError, RecursionError):
            raise StoreError(
                "the server file cannot be written: an ignored entry cannot be encoded"
            ) from None
        data = (text + "\n").encode("ascii")
        if len(data) > MAX_FILE_BYTES:
            raise StoreError(f"the server file would exceed {MAX_FILE_BYTES // 2**20} MiB")
        if self._private is None:
            _atomic_write(self.path, data)
            return
        # The copy first, then the file, then the record naming it: a crash in between leaves a
        # file the record does not name, which is refused until /mcp_restore puts the copy back.
        record = Record(generation, hashlib.sha256(data).hexdigest(), len(servers))
        try:
            os.makedirs(self._private, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the server store's private folder: {exc.strerror}") from None
        _atomic_write(self._private / _COPY_NAME, data)
        _atomic_write(self.path, data)
        _atomic_write(self._private / _RECORD_NAME, record.encode())

    # --- the private record, the copy and the lock -------------------------------------

    @contextlib.contextmanager
    def locked(self, *, exclusive: bool) -> Iterator[None]:
        """An OS lock shared by every process using this data dir (readers shared, writers alone)."""
        if self._private is None:
            yield
            return
        path, flags = self._private / _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            try:
                fd = os.open(path, flags, 0o600)
            except FileNotFoundError:  # the first use of this data dir's store
                os.makedirs(self._private, mode=0o700, exist_ok=True)
                fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open the server store's lock: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def read_record(self) -> Record | None:
        if self._private is None:
            return None
        try:
            data = read_whole(self._private / _RECORD_NAME, at_most=_RECORD_LIMIT)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read the server store's record: {exc.strerror}") from None
        return Record.decode(data)

    def read_copy(self, record: Record | None) -> bytes | None:
        """The saved copy, if it is the one the record names."""
        if self._private is None or record is None:
            return None
        try:
            copy = (self._private / _COPY_NAME).read_bytes()
        except OSError:
            return None
        return copy if hashlib.sha256(copy).hexdigest() == record.digest else None

    def trusted_copy(self, record: Record | None, notes: list[str]) -> list[object]:
        """The raw entries of the saved copy (none without one), noted for the owner's reply."""
        copy = self.read_copy(record)
        if copy is None:
            return []
        try:
            servers = parse_document(copy, "the saved copy")
        except Unreadable:
            return []
        notes.append(f"I started from the copy Playa saved last ({count(len(servers))})")
        return servers
