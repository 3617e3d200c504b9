"""A chat's conversation history, persisted as pydantic-ai messages, one per line (or row)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
from pydantic import TypeAdapter, ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from .._files import append_durably, atomic_write, read_whole
from ..core import HistoryRows
from ._context import message_bytes

__all__ = ["HISTORY_FILE", "History", "read_file"]

logger = logging.getLogger(__name__)

HISTORY_FILE: Final = "history.jsonl"
_OLD_FILE: Final = "history.json"
"""The whole-history JSON array of earlier versions; migrated on first open."""

_MESSAGE: Final[TypeAdapter[ModelMessage]] = TypeAdapter(ModelMessage)


class History:
    """The messages of one chat, kept in a JSON-lines file that survives restarts.

    Only agent turns are stored: commands, their replies and secret answers never are. Each
    turn appends its new messages, one per line, with one fsync, in a worker thread: a turn
    costs the same after three thousand turns as after ten, and never blocks the event loop
    (every other chat of a bot runs on it). A crash can tear the last line; it is dropped on
    load. A file that cannot be read otherwise is moved aside (never deleted) and the chat
    starts afresh. Use ``await History.open(folder)``; with a database (``Storage``), each message
    is a row instead: ``await History.open_rows(rows, scope)``.
    """

    def __init__(
        self,
        path: Path | None,
        messages: Sequence[ModelMessage] = (),
        sizes: Sequence[int] | None = None,
        *,
        rows: _Rows | None = None,
    ) -> None:
        self.path = path
        """The history file; None when the history is kept in rows."""
        self._rows = rows
        self._messages: list[ModelMessage] = list(messages)
        self._sizes: list[int] = (
            list(sizes) if sizes is not None else [len(line) for line in _encode(messages)]
        )
        if len(self._sizes) != len(self._messages):
            raise ValueError(f"{len(self._messages)} messages but {len(self._sizes)} sizes")
        self._lock = anyio.Lock()

    @classmethod
    async def open(cls, folder: Path) -> History:
        """The history kept in ``folder``, read in a worker thread (an older file is migrated)."""
        return cls.of_file(folder, await anyio.to_thread.run_sync(read_file, folder))

    @classmethod
    def of_file(cls, folder: Path, read: tuple[list[ModelMessage], list[int]]) -> History:
        """The history kept in ``folder``, from what ``read_file`` read there."""
        return cls(folder / HISTORY_FILE, *read)

    @classmethod
    async def open_rows(cls, rows: HistoryRows, scope: str) -> History:
        """The history of the chat ``scope`` kept in ``rows``; a row that does not read is skipped."""
        messages: list[ModelMessage] = []
        for line in await rows.load(scope):
            try:
                messages.append(_MESSAGE.validate_json(line))
            except ValidationError:
                logger.warning("a message of the history of %s is unreadable; it is skipped", scope)
        return cls(None, messages, [message_bytes(m) for m in messages], rows=_Rows(rows, scope))

    @property
    def messages(self) -> list[ModelMessage]:
        """A copy of the messages, oldest first."""
        return list(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def sized(self) -> tuple[Sequence[ModelMessage], Sequence[int]]:
        """The messages and the bytes each gives the model (``message_bytes``), without copying either.

        For reading at once (picking the turns a request can hold): a later ``extend`` or
        ``clear`` changes what they hold.
        """
        return self._messages, self._sizes

    async def extend(self, messages: Sequence[ModelMessage]) -> None:
        """Append one turn's messages: kept at once, on disk (one fsync) when this returns.

        Raises ``OSError`` when the file cannot be written; the messages stay in memory.
        """
        new = list(messages)
        if not new:
            return
        async with self._lock:
            self._messages.extend(new)
            self._sizes.extend(message_bytes(message) for message in new)
            if self._rows is not None:
                await self._rows.rows.append(self._rows.scope, _encode(new))
            elif self.path is not None:
                await anyio.to_thread.run_sync(_append, self.path, new)

    async def clear(self) -> None:
        """Forget every message; the file is replaced by an empty one atomically."""
        async with self._lock:
            self._messages = []
            self._sizes = []
            if self._rows is not None:
                await self._rows.rows.clear(self._rows.scope)
            elif self.path is not None:
                await anyio.to_thread.run_sync(_truncate, self.path)


@dataclass(frozen=True)
class _Rows:
    """Where a history kept in rows goes: the rows and the chat's scope."""

    rows: HistoryRows
    scope: str


def _encode(messages: Sequence[ModelMessage]) -> list[bytes]:
    return [_MESSAGE.dump_json(message) for message in messages]


def _append(path: Path, messages: list[ModelMessage]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    append_durably(path, b"".join(line + b"\n" for line in _encode(messages)))


def _truncate(path: Path) -> None:
    # A replace rather than an in-place truncate: a crash leaves the old file or an empty one.
    if path.exists():
        atomic_write(path, b"")


def read_file(folder: Path) -> tuple[list[ModelMessage], list[int]]:
    """The messages of the history kept in ``folder``, and their sizes (an older file is migrated).

    Blocking: ``History.open`` runs it in a worker thread, a chat's open in the open's one hop.
    """
    return _load(folder / HISTORY_FILE)


def _load(path: Path) -> tuple[list[ModelMessage], list[int]]:
    try:
        data = read_whole(path)
    except FileNotFoundError:
        messages = _migrate(path)
        return messages, [message_bytes(m) for m in messages]
    lines = data.split(b"\n")
    # Everything before the last newline was written whole; after it, at most a torn append.
    whole, tail = [line for line in lines[:-1] if line.strip()], lines[-1]
    try:
        messages = list(ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(whole) + b"]"))
    except ValidationError:
        _move_aside(path)
        return [], []
    if tail:
        logger.warning("history file %s ends in a torn line (%d bytes); it is dropped", path, len(tail))
        with open(path, "r+b") as file:
            file.truncate(len(data) - len(tail))
            os.fsync(file.fileno())
    return messages, [message_bytes(m) for m in messages]


def _migrate(path: Path) -> list[ModelMessage]:
    """Read the whole-history file of earlier versions into ``path``, then remove it."""
    old = path.with_name(_OLD_FILE)
    try:
        data = old.read_bytes()
    except FileNotFoundError:
        return []
    try:
        messages = list(ModelMessagesTypeAdapter.validate_json(data))
    except ValidationError:
        _move_aside(old)
        return []
    atomic_write(path, b"".join(line + b"\n" for line in _encode(messages)))
    old.unlink()
    logger.info("history %s migrated to %s", old, path)
    return messages


def _move_aside(path: Path) -> None:
    aside = path.with_name(f"{path.name}.unreadable-{time.time_ns()}")
    os.replace(path, aside)
    logger.warning("history file %s is unreadable; moved to %s, starting afresh", path, aside)
