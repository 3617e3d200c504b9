"""``playa db import`` and ``playa db export``: a data dir's chats into the database, and back.

What moves: each chat's servers (opened with the host's key and sealed again for the other
side: the same key, the same scope) and its history. Both are idempotent: a chat's servers and
history on the receiving side are replaced by the sending side's, so a second run changes
nothing. A broken piece (a server entry that does not verify, a file that is refused, a folder
whose chat cannot be named) is reported and the rest goes on. The workspaces' files and the
audit logs stay in the data dir: the host keeps them there with a database too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import anyio.to_thread

from .agent import HISTORY_FILE, History
from .core import folder_scope, scope_folder, session_state_dir
from .db import DatabaseStorage
from .exceptions import DatabaseError, StoreError
from .mcp_remote.store import LoadResult, RowMemory, RowServers, Sealer, ServerStore, store_path

__all__ = ["Transfer", "export_data_dir", "import_data_dir"]


@dataclass
class Transfer:
    """What an import or export moved, and what it could not (safe to print: no credential)."""

    chats: int = 0
    servers: int = 0
    messages: int = 0
    problems: list[str] = field(default_factory=list)

    def report(self, loaded: LoadResult, scope: str) -> None:
        """Note what of a chat's servers could not be moved."""
        if loaded.warning is not None:
            self.problems.append(f"{scope}: its servers were not moved: {loaded.warning}")
        for rejected in loaded.rejected:
            name = rejected.name if rejected.name is not None else f"entry {rejected.index + 1}"
            self.problems.append(f"{scope}: server {name} was not moved: {rejected.reason}")


def _files(data_dir: Path, scope: str) -> tuple[Path, Path]:
    return data_dir / "workspaces" / scope_folder(scope), session_state_dir(data_dir, scope)


def _chat_folders(data_dir: Path) -> list[str]:
    names: set[str] = set()
    for kind in ("workspaces", "sessions"):
        folder = data_dir / kind
        if folder.is_dir():
            names.update(entry.name for entry in folder.iterdir() if entry.is_dir())
    return sorted(names)


async def import_data_dir(data_dir: Path, storage: DatabaseStorage, sealer: Sealer) -> Transfer:
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
        except (StoreError, DatabaseError, OSError) as exc:
            done.problems.append(f"{scope}: not moved: {exc}")
            continue
        done.chats += moved
    return done


async def export_data_dir(data_dir: Path, storage: DatabaseStorage, sealer: Sealer) -> Transfer:
    """Write every chat of the database into ``data_dir`` (its servers and history replaced)."""
    done = Transfer()
    memory = RowMemory()
    for scope in await storage.scopes():
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
        except (StoreError, DatabaseError, OSError) as exc:
            done.problems.append(f"{scope}: not moved: {exc}")
            continue
        done.chats += 1
    return done
