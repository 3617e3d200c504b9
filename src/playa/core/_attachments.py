"""Files a person sends into a chat (a photo, a document): judged, then kept in the chat's workspace.

A front end takes the bytes (within ``MAX_ATTACHMENT``), asks :func:`attachment_secret` whether
they hold a credential, and only then keeps them with :func:`save_attachment`. What the agent is
told of it (and, for an image, shown) travels with the person's message as an ``Attachment``.

The rule for what counts as a secret has its one home in the inbound classifier: a text document
is classified as a message would be, so a document holding a key is withheld as a message
holding one is. Bytes that are not text cannot be classified; they are checked for every
credential the chat knows, as the model-bound gate checks a binary part.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Final

from ..exceptions import WorkspaceError
from ._inbound import classify
from ._ui import Attachment
from ._workspace_tools import HOST_FOLDER
from .secrets import holds_key

if TYPE_CHECKING:
    from ._commands import CommandRouter
    from ._workspace import Workspace
    from .secrets import Redactor

__all__ = [
    "ATTACHMENT_FOLDER",
    "MAX_ATTACHMENT",
    "attachment_note",
    "attachment_secret",
    "safe_file_name",
    "save_attachment",
]

MAX_ATTACHMENT: Final = 20 * 1024 * 1024
"""Bytes of one file kept in a workspace: the most the Telegram Bot API lets a bot download."""
ATTACHMENT_FOLDER: Final = "received"
"""The workspace folder that files people send are kept in."""
_NAME_CHARS: Final = 80
_UNSAFE: Final = re.compile(r"[^\w.\- ()+,@=]")
_TEXT_SCAN: Final = 2 * 1024 * 1024
"""Characters of a text document the classifier reads (a key anywhere in a larger one is still
found by the chat's redactor, which reads all of it)."""


def safe_file_name(name: str | None, fallback: str) -> str:
    """A file name that is safe to create in a workspace folder, made from what a sender chose.

    No folder part, no control or format character, nothing a shell or a file system reads
    specially; no leading dot (never a hidden file, and never the host's folder), and short.
    """
    base = PurePosixPath((name or "").replace("\\", "/")).name
    base = unicodedata.normalize("NFKC", base)
    base = "".join(c for c in base if unicodedata.category(c)[0] != "C")
    base = _UNSAFE.sub("_", base).strip(" .")
    base = base.lstrip(".-")
    # A name is the sender's text too, and the agent is told it: one that looks like a key is dropped.
    if not base or base.casefold() == HOST_FOLDER or holds_key(base):
        base = fallback
    stem, dot, suffix = base.rpartition(".")
    if not dot or not stem or len(suffix) > 10:
        stem, suffix = base, ""
    room = _NAME_CHARS - (len(suffix) + 1 if suffix else 0)
    stem = stem[:room].rstrip(" .") or fallback
    return f"{stem}.{suffix}" if suffix else stem


def attachment_secret(data: bytes, commands: CommandRouter, known: Redactor) -> bool:
    """Whether a file holds a credential: a text file as the classifier reads a message, and any
    file for every credential the chat knows (in every form the redactor knows)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and classify(text[:_TEXT_SCAN], commands).carries_secret:
        return True
    if not known:
        return False
    # Latin-1 maps every byte to one character: every ASCII form is found where its bytes are.
    return known.contains(data.decode("latin-1")) or (text is not None and known.contains(text))


async def save_attachment(workspace: Workspace, name: str, data: bytes) -> str:
    """Keep ``data`` in the workspace's ``received/`` folder as ``name`` (made safe by
    ``safe_file_name``; numbered when taken); returns its path in the workspace.

    Created as a new file (``Workspace.write(new=True)``): a file or link already there (one the
    agent planted, say) is never overwritten or followed. Within the workspace's quota, or
    refused with its message (``WorkspaceError``) and nothing kept.
    """
    if len(data) > MAX_ATTACHMENT:
        raise WorkspaceError(f"the file is larger than {MAX_ATTACHMENT} bytes")
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    for number in range(1, 1000):
        candidate = name if number == 1 else f"{stem}-{number}" + (f".{suffix}" if suffix else "")
        if await workspace.write(f"{ATTACHMENT_FOLDER}/{candidate}", data, new=True):
            return f"{ATTACHMENT_FOLDER}/{candidate}"
    raise WorkspaceError(f"{ATTACHMENT_FOLDER}/ holds too many files named {name!r}")


def attachment_note(attachment: Attachment, *, shown: bool) -> str:
    """What the agent is told of a file that came with the person's message."""
    kind = "an image" if attachment.media_type.startswith("image/") else "a file"
    text = (
        f"[The person sent {kind} ({attachment.media_type}, {attachment.size:,} bytes); it is in your "
        f"workspace at {attachment.path}"
    )
    return text + ("; it is attached here too.]" if shown else ".]")
