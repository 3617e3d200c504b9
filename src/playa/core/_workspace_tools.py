"""The agent's own file tools, confined to its chat's workspace folder."""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import anyio.to_thread

from ..exceptions import WorkspaceError
from ._tools import Tool, ToolResult

__all__ = [
    "HOST_FOLDER",
    "file_tools",
    "open_file",
    "over_quota",
    "resolve_in_workspace",
    "usage",
    "workspace_path",
    "workspace_tools",
]

MAX_READ = 1024 * 1024
MAX_LIST = 1000

HOST_FOLDER = ".volcanic"
"""The workspace folder that holds the host's own files (the sealed server store): fenced off.

The agent may be steered by anyone in the chat or by any tool result; were it able to read,
rewrite or delete these files it could lock the owner out, drop their servers or bring back
an older copy. The store verifies what it reads anyway; the fence keeps the agent out at all.
"""


def workspace_path(path: str) -> PurePosixPath:
    """``path`` as a path relative to a workspace (``.`` is its top), or a clear refusal.

    Relative paths only, no ``..`` step, never the host's folder: the rules of every workspace,
    on disk or in a database's rows; no file system is looked at.
    """
    if not isinstance(path, str) or "\x00" in path:
        raise WorkspaceError("the path must be text without NUL characters")
    posix = PurePosixPath(path.replace("\\", "/"))
    if posix.is_absolute() or Path(path).is_absolute() or (len(path) > 1 and path[1] == ":"):
        raise WorkspaceError(f"{path!r} is absolute; give a path relative to the workspace")
    if ".." in posix.parts:
        raise WorkspaceError(f"{path!r} contains '..'; paths must stay inside the workspace")
    if any(_is_host_folder(part) for part in posix.parts):
        raise WorkspaceError(_FENCED)
    return posix


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The real path of ``path`` inside ``workspace``, or a clear refusal.

    ``workspace_path``'s rules, and after resolving symlinks the result must still be inside the
    workspace: a link planted in the workspace cannot lead the agent out of it.
    """
    posix = workspace_path(path)
    root = workspace.resolve()
    target = (root / Path(*posix.parts)).resolve() if posix.parts else root
    if target != root and not target.is_relative_to(root):
        raise WorkspaceError(f"{path!r} leads outside the workspace")
    # Judged on the resolved path, so a link to the folder (or into it) is refused too, and
    # case-folded, so ".VOLCANIC" on a case-insensitive file system is the same folder.
    if _fenced(root, target):
        raise WorkspaceError(_FENCED)
    return target


def over_quota(written: int, total: int, quota: int) -> WorkspaceError:
    """The refusal of a write that would take a workspace over its quota (``PLAYA_WORKSPACE_QUOTA``)."""
    return WorkspaceError(
        f"the workspace is full: writing {written} bytes would take it to {total} bytes, over its "
        f"quota of {quota} bytes; delete files first"
    )


def usage(root: Path, without: Path) -> int:
    """The bytes of the agent's regular files in the workspace but ``without``, links not followed.

    The host's folder is not counted: its files are not the agent's to delete, and a database's
    rows, which the same quota bounds, never hold them.
    """
    total = 0
    for folder, dirs, names in os.walk(root):
        if folder == str(root):
            dirs[:] = [d for d in dirs if not _is_host_folder(d)]
        for name in names:
            path = Path(folder, name)
            if path != without:
                with contextlib.suppress(OSError):
                    status = path.lstat()
                    total += status.st_size if stat.S_ISREG(status.st_mode) else 0
    return total


_FENCED = f"{HOST_FOLDER}/ holds the host's own files; the workspace tools cannot use it"


def _is_host_folder(name: str) -> bool:
    return name.casefold() == HOST_FOLDER


def _fenced(root: Path, target: Path) -> bool:
    """Whether the resolved ``target`` is the host's folder or inside it."""
    return (
        target != root and target.is_relative_to(root) and _is_host_folder(target.relative_to(root).parts[0])
    )


def open_file(target: Path, path: str, flags: int) -> int:
    """A descriptor of the regular file ``target`` that has no other name, or a clear refusal.

    O_NOFOLLOW: a symlink swapped in after ``resolve_in_workspace`` is not followed out of the
    workspace. A hard link cannot be told from the file it names: one in the workspace to a
    file outside it (another local process can plant one) would be read or overwritten where
    it lies, so a file with more than one link is refused. Judged on the open descriptor, so a
    link swapped in between the check and the use is the file that is judged. O_NONBLOCK: a
    FIFO planted in the workspace is refused, not waited on.
    """
    fd = os.open(target, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise WorkspaceError(f"{path!r} is not a regular file")
        if status.st_nlink > 1:
            raise WorkspaceError(
                f"{path!r} has other hard links, which may lie outside the workspace; "
                "the workspace tools do not use such files"
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _display(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() or "."


@dataclass(frozen=True, slots=True)
class _FileTool:
    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[str]]

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        try:
            return ToolResult(await self.run(arguments))
        except WorkspaceError as exc:
            return ToolResult.error(str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            return ToolResult.error(
                f"{type(exc).__name__}: {exc.strerror if isinstance(exc, OSError) else exc}"
            )


def _str_arg(arguments: dict[str, Any], name: str, default: str | None = None) -> str:
    value = arguments.get(name, default)
    if not isinstance(value, str):
        raise WorkspaceError(f"argument {name!r} must be a string")
    return value


def workspace_tools(
    workspace: Path, *, quota: int | None = None, writing: threading.Lock | None = None
) -> list[Tool]:
    """The list, read, write and delete tools over one workspace folder; ``quota``: the most bytes
    its files may hold (a write past it is refused; the folder is walked on each write).

    ``writing`` is held for the quota's check and the write, one write at a time: the lock of the
    chat's ``FolderWorkspace``, so a file a person sends meanwhile is counted too.
    """
    root = workspace
    writing = writing if writing is not None else threading.Lock()

    def _list(arguments: dict[str, Any]) -> str:
        target = resolve_in_workspace(root, _str_arg(arguments, "path", "."))
        if not target.is_dir():
            raise WorkspaceError(f"{_str_arg(arguments, 'path', '.')!r} is not a folder")
        base = root.resolve()
        lines = []
        entries = (entry for entry in sorted(target.iterdir()) if not _fenced(base, entry.resolve()))
        for entry in itertools.islice(entries, MAX_LIST):
            suffix = "/" if entry.is_dir() else ""
            lines.append(_display(base, entry) + suffix)
        return "\n".join(lines) if lines else "(empty)"

    def _read(arguments: dict[str, Any]) -> str:
        path = _str_arg(arguments, "path")
        target = resolve_in_workspace(root, path)
        with os.fdopen(open_file(target, path, os.O_RDONLY), "rb") as file:
            data = file.read(MAX_READ + 1)
        text = data[:MAX_READ].decode("utf-8", errors="replace")
        if len(data) > MAX_READ:
            text += f"\n[cut: the file is larger than {MAX_READ} bytes]"
        return text

    def _write(arguments: dict[str, Any]) -> str:
        path = _str_arg(arguments, "path")
        target = resolve_in_workspace(root, path)
        content = _str_arg(arguments, "content")
        if target == root.resolve():
            raise WorkspaceError("cannot write to the workspace folder itself")
        with writing:
            if quota is not None:
                size = len(content.encode())
                if (total := usage(root.resolve(), target) + size) > quota:
                    raise over_quota(size, total, quota)
            target.parent.mkdir(parents=True, exist_ok=True)
            # Not truncated on open: a file that is refused (another link to it) is left as it was.
            fd = open_file(target, path, os.O_WRONLY | os.O_CREAT)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.truncate()
                file.write(content)
        return f"wrote {len(content.encode())} bytes to {_display(root.resolve(), target)}"

    def _delete(arguments: dict[str, Any]) -> str:
        target = resolve_in_workspace(root, _str_arg(arguments, "path"))
        if target.is_dir():
            raise WorkspaceError("only files can be deleted")
        target.unlink()
        return f"deleted {_display(root.resolve(), target)}"

    def threaded(function: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], Awaitable[str]]:
        async def run(arguments: dict[str, Any]) -> str:
            return await anyio.to_thread.run_sync(function, arguments)

        return run

    return file_tools(threaded(_list), threaded(_read), threaded(_write), threaded(_delete))


ToolRun = Callable[[dict[str, Any]], Awaitable[str]]


def file_tools(
    list_files: ToolRun, read_file: ToolRun, write_file: ToolRun, delete_file: ToolRun
) -> list[Tool]:
    """The four workspace tools as the model sees them, whichever backend runs them."""
    path_only = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Path relative to the workspace."}},
        "required": ["path"],
    }
    return [
        _FileTool(
            "list_files",
            "List the files and folders at a path in your workspace ('.' for its top).",
            {"type": "object", "properties": {"path": {"type": "string", "default": "."}}},
            list_files,
        ),
        _FileTool("read_file", "Read a text file from your workspace.", path_only, read_file),
        _FileTool(
            "write_file",
            "Create or overwrite a text file in your workspace.",
            {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
            write_file,
        ),
        _FileTool("delete_file", "Delete a file from your workspace.", path_only, delete_file),
    ]
