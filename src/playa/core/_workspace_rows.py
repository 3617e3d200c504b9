"""A chat's workspace over a database's rows (``WorkspaceRows``), as over a folder.

``RowWorkspace`` is the chat's ``Workspace`` when a database keeps its state: the host's writers
and the agent's tools go through it. The same four tools, the same path rules (``workspace_path``: the ``.volcanic/`` fence holds
here too, though no host file lives in the rows) and the same quota message: the model cannot
tell which backend keeps the chat's files. A folder is a prefix of file paths, as in object
stores: it exists while a file is in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from ..exceptions import WorkspaceError
from ._storage import WorkspaceRows
from ._tools import Tool
from ._workspace_tools import MAX_LIST, MAX_READ, file_tools, workspace_path

__all__ = ["RowWorkspace", "workspace_row_tools"]


def _text(arguments: dict[str, Any], name: str, default: str | None = None) -> str:
    value = arguments.get(name, default)
    if not isinstance(value, str):
        raise WorkspaceError(f"argument {name!r} must be a string")
    return value


def _prefix(folder: str) -> str:
    """The prefix of the row paths in the folder ``folder`` names (``""``: the top), or a refusal."""
    path = workspace_path(folder)
    return path.as_posix() + "/" if path.parts else ""


def workspace_row_tools(rows: WorkspaceRows, scope: str, *, quota: int | None = None) -> list[Tool]:
    """The list, read, write and delete tools over the chat ``scope``'s files in ``rows``."""

    async def _list(arguments: dict[str, Any]) -> str:
        shown = _text(arguments, "path", ".")
        prefix = _prefix(shown)
        paths = await rows.paths(scope, prefix)
        if prefix and not paths:
            raise WorkspaceError(f"{shown!r} is not a folder")
        children = sorted(
            {p[len(prefix) :].split("/", 1)[0] + ("/" if "/" in p[len(prefix) :] else "") for p in paths}
        )
        lines = [prefix + child for child in children[:MAX_LIST]]
        return "\n".join(lines) if lines else "(empty)"

    async def _read(arguments: dict[str, Any]) -> str:
        path = _text(arguments, "path")
        data = await rows.read(scope, workspace_path(path).as_posix())
        if data is None:
            raise WorkspaceError(f"{path!r} does not exist")
        text = data[:MAX_READ].decode("utf-8", errors="replace")
        if len(data) > MAX_READ:
            text += f"\n[cut: the file is larger than {MAX_READ} bytes]"
        return text

    async def _write(arguments: dict[str, Any]) -> str:
        path = _text(arguments, "path")
        content = _text(arguments, "content")
        target = await file_target(rows, scope, path)
        data = content.encode()
        await rows.write(scope, target, data, quota=quota)
        return f"wrote {len(data)} bytes to {target}"

    async def _delete(arguments: dict[str, Any]) -> str:
        path = _text(arguments, "path")
        target = workspace_path(path)
        if not target.parts or await rows.paths(scope, target.as_posix() + "/"):
            raise WorkspaceError("only files can be deleted")
        if not await rows.delete(scope, target.as_posix()):
            raise WorkspaceError(f"{path!r} does not exist")
        return f"deleted {target.as_posix()}"

    return file_tools(_list, _read, _write, _delete)


async def file_target(rows: WorkspaceRows, scope: str, path: str) -> str:
    """The row path a file may be written at, or a clear refusal: ``workspace_path``'s rules, and
    as in a folder, no file where a folder is, nor a folder where a file is."""
    target = workspace_path(path)
    if not target.parts:
        raise WorkspaceError("cannot write to the workspace folder itself")
    if await rows.paths(scope, target.as_posix() + "/"):
        raise WorkspaceError(f"{path!r} is a folder")
    for parent in reversed(target.parents[:-1]):
        # A read of a row that is not there costs one index probe; a file there is the refusal.
        if await rows.read(scope, parent.as_posix()) is not None:
            raise WorkspaceError(f"{parent.as_posix()!r} is a file, not a folder")
    return target.as_posix()


@dataclass(eq=False)
class RowWorkspace:
    """A chat's workspace as rows of ``WorkspaceRows`` (``playa.db``), the quota checked in the
    writing transaction."""

    rows: WorkspaceRows
    scope: str
    quota: int | None = field(default=None, kw_only=True)
    _creating: anyio.Lock = field(default_factory=anyio.Lock, init=False)
    """One ``new`` write at a time: its check that no file is there, and the write. Enough
    while one process serves a chat (its lease); two writers of one chat in two processes
    could both create the same name, the later one replacing the other's file."""

    def __repr__(self) -> str:
        return f"RowWorkspace({self.scope!r})"

    def tools(self) -> list[Tool]:
        return workspace_row_tools(self.rows, self.scope, quota=self.quota)

    async def write(self, path: str, data: bytes, *, new: bool = False) -> bool:
        target = await file_target(self.rows, self.scope, path)
        if not new:
            await self.rows.write(self.scope, target, data, quota=self.quota)
            return True
        async with self._creating:
            if target in await self.rows.paths(self.scope, target):
                return False
            await self.rows.write(self.scope, target, data, quota=self.quota)
        return True

    async def read(self, path: str) -> bytes | None:
        return await self.rows.read(self.scope, workspace_path(path).as_posix())

    async def paths(self, folder: str = ".", *, limit: int | None = None) -> list[str]:
        found = await self.rows.paths(self.scope, _prefix(folder))
        return found if limit is None else found[:limit]
