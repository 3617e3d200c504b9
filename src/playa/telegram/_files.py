"""Photos and documents people send: taken from Telegram within the cap, judged, kept in the workspace.

A file reaches the agent only as a kept file and a note in the person's turn (an image is shown
to the model too): never a file too large (the person is told the cap), never one that holds a
credential (the message is deleted, as one holding a key in its text is).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final, Literal

import anyio
from telegram import Bot, Message
from telegram.error import TelegramError

from ..core import (
    Attachment,
    CommandRouter,
    Redactor,
    Workspace,
    attachment_secret,
    safe_file_name,
    save_attachment,
)
from ..exceptions import WorkspaceError

__all__ = [
    "FILE_KEPT_NOTHING",
    "FILE_SECRET",
    "FILE_SECRET_KEPT",
    "Received",
    "SentFile",
    "file_of",
    "receive",
]

logger = logging.getLogger(__name__)

FILE_KEPT_NOTHING: Final = "Nothing of it was kept or shown to the agent."
FILE_SECRET: Final = (
    "That file holds a credential, so I deleted your message; the file was not kept or shown to "
    "the agent. If the key is real, rotate it."
)
FILE_SECRET_KEPT: Final = (
    "That file holds a credential. It was not kept or shown to the agent, but I could not delete "
    "your message: delete it yourself, and rotate the key."
)
_IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True, slots=True)
class SentFile:
    """The file a message carries, as Telegram describes it (nothing downloaded yet)."""

    file_id: str
    name: str
    media_type: str
    size: int | None


def file_of(message: Message) -> SentFile | None:
    """The photo or document of ``message``, or None. A photo is its largest size."""
    if message.photo:
        photo = message.photo[-1]
        return SentFile(photo.file_id, f"photo-{message.message_id}.jpg", "image/jpeg", photo.file_size)
    document = message.document
    if document is not None:
        fallback = f"file-{message.message_id}"
        name = safe_file_name(document.file_name, fallback)
        media = (document.mime_type or "application/octet-stream").lower()
        return SentFile(document.file_id, name, media, document.file_size)
    return None


@dataclass(frozen=True, slots=True)
class Received:
    """What became of a sent file: kept (``attachment``), or why not (``refusal``, for the person)."""

    outcome: Literal["kept", "too_large", "secret", "failed"]
    attachment: Attachment | None = None
    refusal: str = ""


def _size_text(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB" if size >= 1024 * 1024 else f"{size / 1024:.0f} kB"


def too_large(size: int | None, cap: int) -> Received:
    shown = f" ({_size_text(size)})" if size is not None else ""
    refusal = f"That file is too large{shown}: I take files of up to {_size_text(cap)}. {FILE_KEPT_NOTHING}"
    return Received("too_large", refusal=refusal)


async def receive(
    bot: Bot,
    sent: SentFile,
    *,
    cap: int,
    workspace: Workspace,
    commands: CommandRouter,
    known: Redactor,
) -> Received:
    """Download ``sent`` (refused above ``cap`` before a byte is taken), judge it, and keep it.

    ``known`` is the chat's redactor: a file holding any credential the chat knows is withheld,
    as is a text file the classifier finds a key in.
    """
    if sent.size is not None and sent.size > cap:
        return too_large(sent.size, cap)
    try:
        remote = await bot.get_file(sent.file_id)
        if remote.file_size is not None and remote.file_size > cap:
            return too_large(remote.file_size, cap)
        data = bytes(await remote.download_as_bytearray())
    except TelegramError as exc:
        # Never the exception's text to the person: Telegram's errors may quote the file's URL,
        # which holds the bot's token.
        logger.info("downloading a file failed: %s", type(exc).__name__)
        return Received("failed", refusal=f"Telegram did not give me that file. {FILE_KEPT_NOTHING}")
    if len(data) > cap:
        return too_large(len(data), cap)
    if await anyio.to_thread.run_sync(attachment_secret, data, commands, known):
        return Received("secret")
    try:
        path = await save_attachment(workspace, sent.name, data)
    except (WorkspaceError, OSError) as exc:
        reason = str(exc) if isinstance(exc, WorkspaceError) else (exc.strerror or type(exc).__name__)
        logger.warning("keeping a file failed: %s", reason)
        refusal = f"I could not keep that file in the workspace: {reason}. {FILE_KEPT_NOTHING}"
        return Received("failed", refusal=refusal)
    image = data if sent.media_type in _IMAGE_TYPES else None
    return Received("kept", Attachment(path, sent.media_type, len(data), image))
