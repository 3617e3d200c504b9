"""Where a binary resource the agent read is put: a file of the chat's workspace, under a safe name.

A blob would cost the model many tokens as base64 and tell it nothing, so it goes to
``resources/<server>/<name>`` in the workspace, and the agent is told the path. The name is made
here, never taken as the server gives it: the last segment of the URI, reduced to letters,
digits, ``.``, ``-`` and ``_``, without leading dots, cut, and followed by a digest of the whole
URI (two URIs never share a file; one URI read again replaces its file). So ``../`` or a name
like ``.volcanic`` leads nowhere, and the path is judged again by the workspace's own rule
(the chat's ``Workspace``: in a folder, no link out of it, never its host folder). The file is
written whole (a folder's: a temporary file in the same folder, then renamed): a link planted
where the file goes is replaced, never written through. Its size is bounded by the result
budget, which the answer that carried it already passed, and the workspace's quota; one server's
folder by ``MAX_FILES`` files: a model reading URI after URI of a template cannot fill the disk.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from typing import Final
from urllib.parse import unquote, urlsplit

from ..core import Workspace
from ..exceptions import WorkspaceError

__all__ = ["MAX_FILES", "RESOURCE_FOLDER", "safe_name", "save_blob"]

RESOURCE_FOLDER: Final = "resources"
"""The workspace folder binary resources are saved in, one folder per server."""

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_DOTS: Final = re.compile(r"\.{2,}")
_EXTENSION: Final = re.compile(r"[A-Za-z0-9]{1,10}")
_STEM_LENGTH: Final = 60
MAX_FILES: Final = 200
"""Files one server's folder may hold: a new one beyond them is refused until the agent deletes some."""


def safe_name(uri: str, mime_type: str | None) -> str:
    """A file name for the resource ``uri``: safe on any file system, and the same for the same URI."""
    try:
        path = urlsplit(uri).path or uri
    except ValueError:
        path = uri
    last = unquote(path.rstrip("/").rsplit("/", 1)[-1])
    stem = _DOTS.sub(".", _UNSAFE.sub("-", last))
    base, dot, extension = stem.rpartition(".")
    if not dot or not _EXTENSION.fullmatch(extension):
        base, extension = stem, ""
    base = base.strip(".-_")[:_STEM_LENGTH].strip(".-_") or "resource"
    if not extension:
        guessed = mimetypes.guess_extension(mime_type.split(";")[0].strip()) if mime_type else None
        extension = guessed[1:] if guessed and _EXTENSION.fullmatch(guessed[1:]) else "bin"
    digest = hashlib.sha256(uri.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{base}-{digest}.{extension}"


async def save_blob(workspace: Workspace, server: str, uri: str, mime_type: str | None, data: bytes) -> str:
    """Write ``data`` as the file of ``uri`` read from ``server``; its path relative to the workspace.

    Raises ``WorkspaceError`` (a path that leads outside the workspace or into its host folder, a
    full folder, the quota) or ``OSError``, having written nothing.
    """
    folder_path = f"{RESOURCE_FOLDER}/{server}"
    path = f"{folder_path}/{safe_name(uri, mime_type)}"
    # Counted up to the bound only: a huge folder is not listed whole.
    held = await workspace.paths(folder_path, limit=MAX_FILES)
    if len(held) >= MAX_FILES and path not in held and await workspace.read(path) is None:
        raise WorkspaceError(
            f"{folder_path}/ already holds {MAX_FILES} files, the most it may; delete some to save more"
        )
    await workspace.write(path, data)
    return path
