"""The agent's workspace tools over a database's rows (``WorkspaceRows``), as over a folder.

The same four tools, the same path rules (``workspace_path``: the ``.volcanic/`` fence holds
here too, though no host file lives in the rows) and the same quota message: the model cannot
tell which backend keeps the chat's files. A folder is a prefix of file paths, as in object
stores: it exists while a file is in it.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import WorkspaceError
from ._storage import WorkspaceRows
from ._tools import Tool
from ._workspace_tools import MAX_LIST, MAX_READ, file_tools, workspace_path

__all__ = ["workspace_row_tools"]


def _text(arguments: dict[str, Any], name: str, default: str | None = None) -> str:
    value = arguments.get(name, default)
    if not isinstance(value, str):
        raise WorkspaceError(f"argument {name!r} must be a string")
    return value


def workspace_row_tools(rows: WorkspaceRows, scope: str, *, quota: int | None = None) -> list[Tool]:
    """The list, read, write and delete tools over the chat ``scope``'s files in ``rows``."""

    async def _folder(shown: str) -> str:
        """The prefix of the folder ``shown`` names (``""``: the top), or a refusal."""
        folder = workspace_path(shown)
        return folder.as_posix() + "/" if folder.parts else ""

    async def _list(arguments: dict[str, Any]) -> str:
        shown = _text(arguments, "path", ".")
        prefix = await _folder(shown)
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
        target = workspace_path(path)
        content = _text(arguments, "content")
        if not target.parts:
            raise WorkspaceError("cannot write to the workspace folder itself")
        if await rows.paths(scope, target.as_posix() + "/"):
            raise WorkspaceError(f"{path!r} is a folder")
        data = content.encode()
        await rows.write(scope, target.as_posix(), data, quota=quota)
        return f"wrote {len(data)} bytes to {target.as_posix()}"

    async def _delete(arguments: dict[str, Any]) -> str:
        path = _text(arguments, "path")
        target = workspace_path(path)
        if not target.parts or await rows.paths(scope, target.as_posix() + "/"):
            raise WorkspaceError("only files can be deleted")
        if not await rows.delete(scope, target.as_posix()):
            raise WorkspaceError(f"{path!r} does not exist")
        return f"deleted {target.as_posix()}"

    return file_tools(_list, _read, _write, _delete)
