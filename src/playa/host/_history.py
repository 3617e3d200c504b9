"""A chat's conversation history, persisted as pydantic-ai messages."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

__all__ = ["History"]

logger = logging.getLogger(__name__)


class History:
    """The messages of one chat, kept in a JSON file that survives restarts.

    Only agent turns are stored: commands, their replies and secret answers never are.
    A file that cannot be read is moved aside (never deleted) and the chat starts afresh.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._messages: list[ModelMessage] = self._load()

    @property
    def messages(self) -> list[ModelMessage]:
        return list(self._messages)

    def extend(self, messages: Sequence[ModelMessage]) -> None:
        self._messages.extend(messages)
        self._save()

    def clear(self) -> None:
        self._messages = []
        self._save()

    def _load(self) -> list[ModelMessage]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            return list(ModelMessagesTypeAdapter.validate_json(data))
        except ValidationError:
            aside = self.path.with_name(f"{self.path.name}.unreadable-{time.time_ns()}")
            os.replace(self.path, aside)
            logger.warning("history file %s is unreadable; moved to %s, starting afresh", self.path, aside)
            return []

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = ModelMessagesTypeAdapter.dump_json(self._messages)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".history-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
