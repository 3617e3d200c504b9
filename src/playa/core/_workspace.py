"""A chat's workspace as one object: the agent's files, in a folder or in a database's rows.

Everything that writes a chat's files goes through it: the agent's four tools, a file a person
sends (``received/…``), a binary resource a server returns (``resources/…``). So the path rules
(``workspace_path``), the ``.volcanic/`` fence and the quota hold for every writer alike, and
the chat's files follow it to whichever process serves it when a database keeps them. The host
picks the backend once (``open_workspace``); no writer asks which one it has.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import anyio.to_thread

from ..exceptions import WorkspaceError
from ._storage import Storage
from ._tools import Tool
from ._workspace_rows import RowWorkspace
from ._workspace_tools import (
    HOST_FOLDER,
    open_file,
    over_quota,
    resolve_in_workspace,
    usage,
    workspace_path,
    workspace_tools,
)

__all__ = ["FolderWorkspace", "Workspace", "open_workspace"]


class Workspace(Protocol):
    """A chat's files: the agent's tools over them, and what the host's own writers need.

    Paths are relative to the workspace, checked by ``workspace_path`` (a refusal is a
    ``WorkspaceError`` whose text the person or the model may be shown as it is).
    """

    @property
    def quota(self) -> int | None:
        """The most bytes the chat's files may hold together (None: no bound)."""
        ...

    def tools(self) -> list[Tool]:
        """The list, read, write and delete tools the agent gets."""
        ...

    async def write(self, path: str, data: bytes, *, new: bool = False) -> bool:
        """Create or replace the file (``new``: only create it; False, nothing written, when a file
        is there). Raises ``WorkspaceError`` (a refused path; over the quota, ``over_quota``'s
        message) or ``OSError``, having written nothing."""
        ...

    async def read(self, path: str) -> bytes | None:
        """The file's bytes; None when there is none."""
        ...

    async def paths(self, folder: str = ".", *, limit: int | None = None) -> list[str]:
        """The files under ``folder`` (at any depth; never the host's folder), as workspace paths;
        at most ``limit`` of them (which ones, then, is not said)."""
        ...


def open_workspace(folder: Path, scope: str, storage: Storage | None, *, quota: int | None) -> Workspace:
    """The workspace of the chat ``scope``: the rows of ``storage`` when the host keeps its state
    in a database, else ``folder``."""
    if storage is None:
        return FolderWorkspace(folder, quota=quota)
    return RowWorkspace(storage.workspace, scope, quota=quota)


@dataclass(eq=False)
class FolderWorkspace:
    """A chat's workspace in a folder of the data dir; its blocking work runs in a worker thread.

    One lock per chat covers the quota's check and the write, for the tools and every other
    writer: two writes cannot both pass the check against the old total.
    """

    root: Path
    quota: int | None = field(default=None, kw_only=True)
    _writing: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __repr__(self) -> str:
        return f"FolderWorkspace({str(self.root)!r})"

    def tools(self) -> list[Tool]:
        return workspace_tools(self.root, quota=self.quota, writing=self._writing)

    async def write(self, path: str, data: bytes, *, new: bool = False) -> bool:
        return await anyio.to_thread.run_sync(self._write, path, data, new)

    async def read(self, path: str) -> bytes | None:
        return await anyio.to_thread.run_sync(self._read, path)

    async def paths(self, folder: str = ".", *, limit: int | None = None) -> list[str]:
        return await anyio.to_thread.run_sync(self._paths, folder, limit)

    def _write(self, path: str, data: bytes, new: bool) -> bool:
        target = workspace_path(path)
        if not target.parts:
            raise WorkspaceError("cannot write to the workspace folder itself")
        parent = target.parent.as_posix()
        with self._writing:
            folder = resolve_in_workspace(self.root, parent)
            file = folder / target.name
            if new and os.path.lexists(file):
                return False
            # Checked before a folder is made: a refused write leaves nothing behind.
            quota = self.quota
            if quota is not None and (total := usage(self.root.resolve(), file) + len(data)) > quota:
                raise over_quota(len(data), total, quota)
            folder.mkdir(parents=True, exist_ok=True)
            # Judged again once the folders exist: a link put in their place meanwhile is caught.
            folder = resolve_in_workspace(self.root, parent)
            if not folder.is_dir():
                raise WorkspaceError(f"{parent!r} is not a folder of the workspace")
            file = folder / target.name
            if new:
                return _create(file, data)
            _replace(folder, file, data)
        return True

    def _read(self, path: str) -> bytes | None:
        target = resolve_in_workspace(self.root, path)
        try:
            fd = open_file(target, path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as file:
            return file.read()

    def _paths(self, folder: str, limit: int | None) -> list[str]:
        base = resolve_in_workspace(self.root, folder)
        root = self.root.resolve()
        if not base.is_dir():
            return []
        found: list[str] = []
        for current, dirs, names in os.walk(base):
            here = Path(current)
            dirs[:] = [d for d in dirs if not (here == root and d.casefold() == HOST_FOLDER)]
            for name in names:
                with contextlib.suppress(OSError):
                    if stat.S_ISREG((here / name).lstat().st_mode):
                        found.append((here / name).relative_to(root).as_posix())
                if limit is not None and len(found) >= limit:
                    return found
        return sorted(found)


def _create(file: Path, data: bytes) -> bool:
    """Write a new file, never over one already there nor through a link (False: one is there)."""
    try:
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
    except BaseException:
        file.unlink(missing_ok=True)
        raise
    return True


def _replace(folder: Path, file: Path, data: bytes) -> None:
    """Write the file whole: a temporary file in its folder, then renamed over whatever is there
    (a link planted where the file goes is replaced, never written through)."""
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".part-")
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        os.replace(temporary, file)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
