"""``playa db import`` and ``playa db export``: a data dir's chats into the database, and back.

What moves: each chat's servers (opened with the host's key and sealed again for the other
side: the same key, the same scope), its history and its workspace's files. Both are
idempotent: a chat's servers and history on the receiving side are replaced by the sending
side's, and each file is written over the receiving side's file of the same path (a file only
the receiving side has is left), so a second run changes nothing. A broken piece (a server entry
that does not verify, a file that cannot be read or whose path no workspace may hold, a folder
whose chat cannot be named) is reported and the rest goes on. A chat's audit log moves whole
or not at all: it is verified first (the chain and its head, with the host's key), and one that
does not verify is reported and left where it is, so a copy never launders a cut or an edit.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import anyio.to_thread

from .agent import HISTORY_FILE, History
from .core import HOST_FOLDER, FolderWorkspace, RowWorkspace, folder_scope, scope_folder, session_state_dir
from .db import DatabaseStorage
from .exceptions import DatabaseError, StoreError, WorkspaceError
from .mcp_remote.store import (
    AuditKey,
    LoadResult,
    RowMemory,
    RowServers,
    Sealer,
    ServerStore,
    Verification,
    audit_folder,
    log_rows,
    replace_log,
    store_path,
    verify_log,
    verify_rows,
)

__all__ = ["Transfer", "export_data_dir", "import_data_dir"]


@dataclass
class Transfer:
    """What an import or export moved, and what it could not (safe to print: no credential)."""

    chats: int = 0
    servers: int = 0
    messages: int = 0
    files: int = 0
    audit_records: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """What moved, in a line."""
        return (
            f"{self.chats} chats, {self.servers} servers, {self.messages} messages of history, "
            f"{self.files} workspace files, {self.audit_records} audit records"
        )

    def report(self, loaded: LoadResult, scope: str) -> None:
        """Note what of a chat's servers could not be moved."""
        if loaded.warning is not None:
            self.problems.append(f"{scope}: its servers were not moved: {loaded.warning}")
        for rejected in loaded.rejected:
            name = rejected.name if rejected.name is not None else f"entry {rejected.index + 1}"
            self.problems.append(f"{scope}: server {name} was not moved: {rejected.reason}")

    def verified(self, found: Verification, scope: str) -> bool:
        """Whether a chat's audit log verified; the first break noted when it did not."""
        if found.ok:
            self.audit_records += len(found.records)
            return True
        self.problems.append(f"{scope}: its audit log was not moved: it breaks at {found.breaks[0]}")
        return False


def _files(data_dir: Path, scope: str) -> tuple[Path, Path]:
    return data_dir / "workspaces" / scope_folder(scope), session_state_dir(data_dir, scope)


def _chat_folders(data_dir: Path) -> list[str]:
    names: set[str] = set()
    for kind in ("workspaces", "sessions"):
        folder = data_dir / kind
        if folder.is_dir():
            names.update(entry.name for entry in folder.iterdir() if entry.is_dir())
    return sorted(names)


async def import_data_dir(
    data_dir: Path, storage: DatabaseStorage, sealer: Sealer, audit: AuditKey
) -> Transfer:
    """Move every chat of ``data_dir`` into the database (its servers and history replaced)."""
    done = Transfer()
    memory = RowMemory()
    for folder in _chat_folders(data_dir):
        scope = folder_scope(folder)
        if scope is None:
            done.problems.append(f"{folder}: not a chat's folder this Playa can name; skipped")
            continue
        workspace, state = _files(data_dir, scope)
        try:
            moved = False
            if store_path(workspace).exists():
                loaded = await anyio.to_thread.run_sync(
                    ServerStore(workspace, scope, sealer, state_dir=state).load
                )
                done.report(loaded, scope)
                if loaded.warning is None:
                    await RowServers(storage.servers, scope, sealer, memory).save(loaded.entries)
                    done.servers += len(loaded.entries)
                    moved = True
            if (state / HISTORY_FILE).exists():
                history = await History.open(state)
                rows = await History.open_rows(storage.history, scope)
                await rows.clear()
                await rows.extend(history.messages)
                done.messages += len(history)
                moved = True
            if await _import_files(workspace, storage, scope, done):
                moved = True
            if await _import_audit(state, storage, scope, audit, done):
                moved = True
        except (StoreError, DatabaseError, OSError) as exc:
            done.problems.append(f"{scope}: not moved: {exc}")
            continue
        done.chats += moved
    return done


async def export_data_dir(
    data_dir: Path, storage: DatabaseStorage, sealer: Sealer, audit: AuditKey
) -> Transfer:
    """Write every chat of the database into ``data_dir`` (its servers and history replaced)."""
    done = Transfer()
    memory = RowMemory()
    scopes = (
        set(await storage.scopes())
        | set(await storage.workspace.scopes())
        | set(await storage.audit.scopes())
    )
    for scope in sorted(scopes):
        workspace, state = _files(data_dir, scope)
        try:
            rows = RowServers(storage.servers, scope, sealer, memory)
            if await storage.servers.generation(scope) > 0:
                loaded = await rows.load()
                done.report(loaded, scope)
                if loaded.warning is None:
                    await anyio.to_thread.run_sync(workspace.mkdir, 0o700, True, True)
                    store = ServerStore(workspace, scope, sealer, state_dir=state)
                    await anyio.to_thread.run_sync(store.save, loaded.entries)
                    done.servers += len(loaded.entries)
            kept = await History.open_rows(storage.history, scope)
            if len(kept):
                history = await History.open(state)
                await history.clear()
                await history.extend(kept.messages)
                done.messages += len(kept)
            await _export_files(storage, scope, FolderWorkspace(workspace), done)
            await _export_audit(storage, scope, state, audit, done)
        except (StoreError, DatabaseError, OSError) as exc:
            done.problems.append(f"{scope}: not moved: {exc}")
            continue
        done.chats += 1
    return done


async def _import_audit(
    state: Path, storage: DatabaseStorage, scope: str, key: AuditKey, done: Transfer
) -> bool:
    """The chat's audit log from its private folder into its rows, if it verifies whole; whether
    one moved. The rows' head names the last record, as an append's does."""
    found = await anyio.to_thread.run_sync(verify_log, audit_folder(state), scope, key)
    if not found.records and found.ok:
        return False
    if not done.verified(found, scope):
        return False
    head, rows = log_rows(found.records, scope, key)
    await storage.audit.replace(scope, head, rows)
    return True


async def _export_audit(
    storage: DatabaseStorage, scope: str, state: Path, key: AuditKey, done: Transfer
) -> None:
    """The chat's audit log from its rows into its private folder, if it verifies whole."""
    found = await verify_rows(storage.audit, scope, key)
    if (not found.records and found.ok) or not done.verified(found, scope):
        return
    head, _ = log_rows(found.records, scope, key)
    await anyio.to_thread.run_sync(replace_log, audit_folder(state), found.records, head)


async def _import_files(workspace: Path, storage: DatabaseStorage, scope: str, done: Transfer) -> bool:
    """The files of a chat's workspace folder into its rows (never the host's folder, no link
    followed); whether any moved. One that cannot be read, or whose path no workspace may hold,
    is reported and skipped."""
    found, skipped = await anyio.to_thread.run_sync(_listed, workspace)
    done.problems.extend(f"{scope}: {problem}" for problem in skipped)
    rows = RowWorkspace(storage.workspace, scope)
    moved = 0
    for path in found:
        try:
            path.encode("utf-8")
            data = await anyio.to_thread.run_sync(_read_file, workspace / path)
            # The rows' own rules: a path no workspace may hold, or a file where the chat's
            # rows have a folder (or under one of its files), is refused.
            await rows.write(path, data)
        except (WorkspaceError, UnicodeEncodeError, OSError) as exc:
            done.problems.append(f"{scope}: file {path!r} was not moved: {_reason(exc)}")
            continue
        moved += 1
    done.files += moved
    return moved > 0


async def _export_files(
    storage: DatabaseStorage, scope: str, workspace: FolderWorkspace, done: Transfer
) -> None:
    """A chat's rows into its workspace folder, each through the folder's own rules (a row whose
    path leads outside, or into the host's folder, is reported and not written)."""
    for path in await storage.workspace.paths(scope, ""):
        data = await storage.workspace.read(scope, path)
        if data is None:
            continue  # deleted meanwhile
        try:
            await workspace.write(path, data)
        except (WorkspaceError, OSError) as exc:
            done.problems.append(f"{scope}: file {path!r} was not moved: {_reason(exc)}")
            continue
        done.files += 1


def _listed(workspace: Path) -> tuple[list[str], list[str]]:
    """The workspace's files as workspace paths, and what was skipped (a link, a special file)."""
    found: list[str] = []
    skipped: list[str] = []
    if not workspace.is_dir():
        return found, skipped

    def unreadable(exc: OSError) -> None:
        shown = Path(exc.filename).relative_to(workspace).as_posix() if exc.filename else "?"
        skipped.append(f"folder {shown!r} was not moved: {exc.strerror or type(exc).__name__}")

    for current, dirs, names in os.walk(workspace, onerror=unreadable):
        here = Path(current)
        if here == workspace:
            dirs[:] = [d for d in dirs if d.casefold() != HOST_FOLDER]
        for name in [*names, *(d for d in dirs if (here / d).is_symlink())]:
            path = (here / name).relative_to(workspace).as_posix()
            try:
                regular = stat.S_ISREG((here / name).lstat().st_mode)
            except OSError as exc:
                skipped.append(f"file {path!r} was not moved: {_reason(exc)}")
                continue
            if regular:
                found.append(path)
            else:
                skipped.append(f"file {path!r} was not moved: not a regular file (a link is not followed)")
    return sorted(found), skipped


def _read_file(path: Path) -> bytes:
    """A regular file's bytes; a link swapped in meanwhile is not followed."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WorkspaceError("not a regular file")
        return file.read()


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    if isinstance(exc, UnicodeEncodeError):
        return "its name is not UTF-8"
    return str(exc)
