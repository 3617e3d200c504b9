"""Sealed records that survive a restart: updates not yet handled, replies not yet delivered.

An update may hold a key (``/mcp_add … --bearer KEY``) and a reply quotes the conversation, so
each record is sealed with AES-256-GCM under a key derived from the bot token, like the chats'
server files; its folder and name are the associated data, so records cannot be swapped. One
file per record, written atomically: a crash loses at most the record being written.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .._files import atomic_write

__all__ = ["Journal"]

logger = logging.getLogger(__name__)

_INFO: Final = b"playa telegram journal v1"
_NONCE: Final = 12
_SUFFIX: Final = ".rec"


class Journal:
    """One folder of sealed JSON records, read back in name order."""

    def __init__(self, folder: Path, *, token: str, kind: str) -> None:
        self.folder = folder
        self._kind = kind
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(token.encode())
        self._aead = AESGCM(key)

    @classmethod
    def for_bot(cls, data_dir: Path, token: str, kind: str) -> Journal:
        """The ``kind`` journal of the bot with ``token``: bots sharing a data dir keep apart."""
        bot_id = token.partition(":")[0]
        bot_id = bot_id if bot_id.isdigit() else "bot"
        return cls(data_dir / "telegram" / bot_id / kind, token=token, kind=kind)

    def _aad(self, name: str) -> bytes:
        return f"{self._kind}/{name}".encode()

    def put(self, name: str, record: dict[str, Any]) -> None:
        """Write ``record`` under ``name`` (replacing it), durably."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        nonce = os.urandom(_NONCE)
        data = nonce + self._aead.encrypt(nonce, json.dumps(record).encode(), self._aad(name))
        atomic_write(self.folder / (name + _SUFFIX), data)

    def delete(self, name: str) -> None:
        (self.folder / (name + _SUFFIX)).unlink(missing_ok=True)

    def load(self) -> list[tuple[str, dict[str, Any]]]:
        """Every record, by name; one that does not open is moved aside and reported, not lost."""
        try:
            paths = sorted(self.folder.glob("*" + _SUFFIX))
        except OSError:
            return []
        records: list[tuple[str, dict[str, Any]]] = []
        for path in paths:
            name = path.name.removesuffix(_SUFFIX)
            try:
                data = path.read_bytes()
                plain = self._aead.decrypt(data[:_NONCE], data[_NONCE:], self._aad(name))
                record = json.loads(plain)
                if not isinstance(record, dict):
                    raise ValueError("not an object")
            except (OSError, InvalidTag, ValueError) as exc:
                logger.warning(
                    "%s record %s cannot be read (%s); moved aside", self._kind, name, type(exc).__name__
                )
                os.replace(path, path.with_name(path.name + ".unreadable"))
                continue
            records.append((name, record))
        return records
