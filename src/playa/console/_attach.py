"""``/attach <path> [message]``: a local file sent with a message, as a photo or document is on Telegram.

The console's one person is the owner at the host's own terminal, who can read the file anyway:
``/attach`` reads a path of this machine, so it is the console's alone, never a host command
(a chat member elsewhere must never name a host file). The file is judged and kept as a file
sent to the bot is (``core.attachment_secret``, ``core.save_attachment``).
"""

from __future__ import annotations

import io
import mimetypes
import os
import shlex
import stat
from pathlib import Path
from typing import Final

import anyio

from ..agent import Host
from ..core import (
    MAX_ATTACHMENT,
    Attachment,
    ChatSession,
    IncomingMessage,
    Sender,
    attachment_secret,
    safe_file_name,
    save_attachment,
)
from ..exceptions import WorkspaceError

__all__ = ["ATTACH", "attached"]

ATTACH: Final = "attach"
USAGE: Final = "usage: /attach <path> [message]: the file goes into the workspace, and the agent is told"
_IMAGES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


async def attached(host: Host, session: ChatSession, sender: Sender, args: str) -> IncomingMessage | str:
    """The message ``/attach`` sends (the rest of the line, with the file kept in the workspace),
    or what to tell the owner instead."""
    # The path as a shell word (quoted when it has spaces); the message after it as typed.
    stream = io.StringIO(args.strip())
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split = True
    try:
        word = lexer.get_token()
    except ValueError:
        return USAGE
    if not word:
        return USAGE
    path, message = Path(word), stream.read().strip()
    try:
        data = await anyio.to_thread.run_sync(_read, path)
    except (OSError, WorkspaceError) as exc:
        return f"Could not read that file: {exc.strerror if isinstance(exc, OSError) else exc}."
    if await anyio.to_thread.run_sync(attachment_secret, data, host.commands, host.redactor(session)):
        return "That file holds a credential, so it was not kept or shown to the agent."
    name = safe_file_name(path.name, "file")
    try:
        kept = await save_attachment(session.files, name, data)
    except (OSError, WorkspaceError) as exc:
        return (
            f"Could not keep that file in the workspace: {exc.strerror if isinstance(exc, OSError) else exc}."
        )
    media = mimetypes.guess_type(name)[0] or "application/octet-stream"
    attachment = Attachment(kept, media, len(data), data if media in _IMAGES else None)
    return IncomingMessage(message, sender, None, (attachment,))


def _read(path: Path) -> bytes:
    """A regular file's bytes, at most ``MAX_ATTACHMENT``; a FIFO or a device is refused, not waited on."""
    fd = os.open(path.expanduser(), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WorkspaceError("it is not a regular file")
        data = file.read(MAX_ATTACHMENT + 1)
    if len(data) > MAX_ATTACHMENT:
        raise WorkspaceError(f"it is larger than {MAX_ATTACHMENT // (1024 * 1024)} MB")
    return data
