"""Sealed records that survive a process: updates not yet handled, replies not yet delivered.

An update may hold a key (``/mcp_add … --bearer KEY``) and a reply quotes the conversation, so
each record is sealed with AES-256-GCM under a key derived from the bot token, like the chats'
server files; its kind and name are the associated data, so records cannot be swapped. The
records live in the data dir (one file a record, written atomically: a crash loses at most the
record being written) or, with a database, in its rows (``RecordRows``), where any process of
the bot can take them over. Names sort in the order records are handled.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Final, Protocol

import anyio
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .._files import atomic_write
from ..core import RecordRows

__all__ = ["Journal", "bot_id"]

logger = logging.getLogger(__name__)

_INFO: Final = b"playa telegram journal v1"
_NONCE: Final = 12
_SUFFIX: Final = ".rec"


def bot_id(token: str) -> str:
    """The bot's id, the token's public part (``123:secret`` → ``123``): what names its records."""
    head = token.partition(":")[0]
    return head if head.isdigit() else "bot"


class _Place(Protocol):
    async def add(self, name: str, chat: str, data: bytes) -> bool: ...
    async def put(self, name: str, chat: str, data: bytes) -> None: ...
    async def delete(self, name: str) -> None: ...
    async def load(self, chat: str | None) -> list[tuple[str, bytes]]: ...
    async def unreadable(self, name: str) -> None: ...


class _Folder:
    """Records as files of one folder, read and written in a worker thread."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, name: str) -> Path:
        return self.folder / (name + _SUFFIX)

    def _write(self, name: str, data: bytes, *, new: bool) -> bool:
        if new and self._path(name).exists():
            return False
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(self._path(name), data)
        return True

    async def add(self, name: str, chat: str, data: bytes) -> bool:
        return await anyio.to_thread.run_sync(lambda: self._write(name, data, new=True))

    async def put(self, name: str, chat: str, data: bytes) -> None:
        await anyio.to_thread.run_sync(lambda: self._write(name, data, new=False))

    async def delete(self, name: str) -> None:
        await anyio.to_thread.run_sync(lambda: self._path(name).unlink(missing_ok=True))

    def _load(self) -> list[tuple[str, bytes]]:
        try:
            paths = sorted(self.folder.glob("*" + _SUFFIX))
        except OSError:
            return []
        records: list[tuple[str, bytes]] = []
        for path in paths:
            try:
                records.append((path.name.removesuffix(_SUFFIX), path.read_bytes()))
            except OSError:
                continue
        return records

    async def load(self, chat: str | None) -> list[tuple[str, bytes]]:
        return await anyio.to_thread.run_sync(self._load)

    async def unreadable(self, name: str) -> None:
        path = self._path(name)
        await anyio.to_thread.run_sync(os.replace, path, path.with_name(path.name + ".unreadable"))


class _Rows:
    """Records as rows of a database, shared by every process of the bot."""

    def __init__(self, rows: RecordRows, bot: str) -> None:
        self._rows = rows
        self._bot = bot

    async def add(self, name: str, chat: str, data: bytes) -> bool:
        return await self._rows.add(self._bot, name, chat, data)

    async def put(self, name: str, chat: str, data: bytes) -> None:
        await self._rows.put(self._bot, name, chat, data)

    async def delete(self, name: str) -> None:
        await self._rows.done(self._bot, name)

    async def load(self, chat: str | None) -> list[tuple[str, bytes]]:
        return await self._rows.load(self._bot, chat)

    async def unreadable(self, name: str) -> None:
        await self._rows.done(self._bot, name)


class Journal:
    """Sealed JSON records of one kind, by name, per chat; read back in name order."""

    def __init__(self, place: _Place, *, token: str, kind: str) -> None:
        self._place = place
        self._kind = kind
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(token.encode())
        self._aead = AESGCM(key)

    @classmethod
    def for_bot(cls, data_dir: Path, token: str, kind: str) -> Journal:
        """The ``kind`` journal of the bot with ``token`` in the data dir: bots sharing it keep apart."""
        return cls(_Folder(data_dir / "telegram" / bot_id(token) / kind), token=token, kind=kind)

    @classmethod
    def in_rows(cls, rows: RecordRows, token: str, kind: str) -> Journal:
        """The ``kind`` journal of the bot with ``token`` in a database's ``rows``."""
        return cls(_Rows(rows, bot_id(token)), token=token, kind=kind)

    @property
    def shared(self) -> bool:
        """Whether other processes see these records (a database's rows)."""
        return isinstance(self._place, _Rows)

    def _aad(self, name: str) -> bytes:
        return f"{self._kind}/{name}".encode()

    def _seal(self, name: str, record: dict[str, Any]) -> bytes:
        nonce = os.urandom(_NONCE)
        return nonce + self._aead.encrypt(nonce, json.dumps(record).encode(), self._aad(name))

    async def add(self, name: str, chat: int, record: dict[str, Any]) -> bool:
        """Write a new ``record`` under ``name``, durably; False (nothing written) if the name is known."""
        return await self._place.add(name, str(chat), self._seal(name, record))

    async def put(self, name: str, chat: int, record: dict[str, Any]) -> None:
        """Write ``record`` under ``name`` (replacing it), durably."""
        await self._place.put(name, str(chat), self._seal(name, record))

    async def delete(self, name: str) -> None:
        await self._place.delete(name)

    async def load(self, chat: int | None = None) -> list[tuple[str, dict[str, Any]]]:
        """The records of ``chat`` (None: every one), by name; one that does not open is put
        aside and reported, not lost. A folder serves one process, which takes every chat's
        records at its start: it returns them all."""
        records: list[tuple[str, dict[str, Any]]] = []
        for name, data in await self._place.load(None if chat is None else str(chat)):
            try:
                plain = self._aead.decrypt(data[:_NONCE], data[_NONCE:], self._aad(name))
                record = json.loads(plain)
                if not isinstance(record, dict):
                    raise ValueError("not an object")
            except (InvalidTag, ValueError) as exc:
                logger.warning(
                    "%s record %s cannot be read (%s); put aside", self._kind, name, type(exc).__name__
                )
                await self._place.unreadable(name)
                continue
            records.append((name, record))
        return records
