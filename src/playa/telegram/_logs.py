"""Keeping the bot token out of log lines, its own and those of httpx and python-telegram-bot.

The token is part of every Bot API URL, and httpx logs each request's URL at INFO level.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["TokenFilter", "quiet_raw_traffic", "token_filtered_logs"]

_THIRD_PARTY = ("httpx", "httpcore", "telegram", "uvicorn")


class TokenFilter(logging.Filter):
    """Rewrites a record whose text holds the token; keeps every record."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._token:
            return True
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if self._token in text or (record.exc_text and self._token in record.exc_text):
            record.msg = text.replace(self._token, "[bot token]")
            record.args = None
            if record.exc_text:
                record.exc_text = record.exc_text.replace(self._token, "[bot token]")
        return True

    def __repr__(self) -> str:
        return "TokenFilter()"


def _loggers() -> list[logging.Logger]:
    # A filter on a logger sees only that logger's own records, not its children's, so every
    # existing logger of these libraries gets one (theirs are created when they are imported).
    names = {"playa", *_THIRD_PARTY}
    names.update(
        name
        for name in list(logging.root.manager.loggerDict)
        if name.split(".", 1)[0] in (*_THIRD_PARTY, "playa")
    )
    return [logging.getLogger(name) for name in sorted(names)]


@contextmanager
def token_filtered_logs(token: str) -> Iterator[None]:
    """While the block runs, no log line of Playa or its HTTP libraries shows ``token``."""
    token_filter = TokenFilter(token)
    loggers = _loggers()
    for logger in loggers:
        logger.addFilter(token_filter)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(token_filter)


def quiet_raw_traffic() -> None:
    """Keep python-telegram-bot's DEBUG records out of every log: they are the raw updates.

    At DEBUG it logs every update it receives and every request it makes, verbatim: an
    ``/mcp_add … --bearer KEY``, a secret answer, a key edited into a message. Redaction cannot
    know a key the bot has not yet recognised, so those records are not made at all.
    """
    raw = logging.getLogger("telegram")
    if raw.getEffectiveLevel() < logging.INFO:
        raw.setLevel(logging.INFO)
