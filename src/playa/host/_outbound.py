"""The outbound gate for logs: every log record of every library, redacted before any handler.

A filter on a logger sees only that logger's own records, and a filter on a handler only that
handler's, so both miss something: a library's logger created later, a handler added by a test
harness or a server framework, the traceback that ``exc_info`` carries (formatted by the
handler, after every filter ran). The gate is instead the process's log-record factory: every
record is made by it, so it redacts the message (args applied), the formatted exception and the
stack before any filter or handler can see the record.

What it removes: every credential the process knows (:func:`outbound_secrets`: every chat's
credentials, the bot token, the encryption secret, the providers' keys — whoever learns one adds
it), in every encoding the redactor knows, and every piece of :data:`PIECE` characters of one:
libraries shorten what they log (pydantic's errors show ``'{not json, Bearer sk-ab...f026202'``),
and a shortened credential is a leak too. Records of the loggers that dump raw chat traffic
(python-telegram-bot's requests and updates) also lose every credential-shaped word: a key a
user just sent is in them before anything has recognised it as a key.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from collections.abc import Callable, Iterable
from typing import Any, Final

from ._inbound import looks_like_credential
from ._redact import MIN_SECRET_LENGTH, REDACTED, Redactor

__all__ = ["OutboundSecrets", "install_outbound_gate", "outbound_secrets"]

_RAW_TRAFFIC: Final = ("telegram",)
"""Loggers (and their children) whose records may quote a chat message before it is classified."""
_WORD: Final = re.compile(r"[A-Za-z0-9_\-.~+/=:]{8,}")
PIECE: Final = 12
"""Characters of a credential that a log line may not show, wherever they were cut from."""


def _pieces(value: str) -> set[str]:
    return {value[i : i + PIECE] for i in range(len(value) - PIECE + 1)}


class OutboundSecrets:
    """Every credential the process knows; only grows (an old key may still sit in a late record)."""

    def __init__(self) -> None:
        self._values: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self.redactor = Redactor.EMPTY

    def add(self, values: Iterable[str]) -> None:
        new = {value for value in values if len(value) >= MIN_SECRET_LENGTH}
        if new <= self._values:
            return
        with self._lock:
            self._values = self._values | new
            pieces: set[str] = set()
            for value in self._values:
                pieces |= _pieces(value)
            self.redactor = Redactor(self._values, literal=pieces)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def __repr__(self) -> str:
        return f"<OutboundSecrets: {len(self._values)} values>"


_SECRETS = OutboundSecrets()


def outbound_secrets() -> OutboundSecrets:
    """The process's credentials registry, read by the log gate."""
    return _SECRETS


def _mask_shaped(text: str) -> str:
    return _WORD.sub(lambda m: REDACTED if looks_like_credential(m.group()) else m.group(), text)


def _raw_traffic(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in _RAW_TRAFFIC)


def redact_record(record: logging.LogRecord, redactor: Redactor) -> None:
    """Redact one record in place: its message, its exception and its stack."""
    shaped = _raw_traffic(record.name)
    if not redactor and not shaped:
        return
    try:
        message = record.getMessage()
    except Exception:  # boundary: a malformed log call must not take the logger down
        message = f"{record.msg!s} [arguments could not be formatted]"
    clean = redactor.redact(message)
    if shaped:
        clean = _mask_shaped(clean)
    if clean != message or record.args:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[1] is not None:
        text = "".join(traceback.format_exception(record.exc_info[1])).rstrip("\n")
        clean = redactor.redact(text)
        if shaped:
            clean = _mask_shaped(clean)
        if clean != text:
            # The handler would format exc_info again, credential and all: keep the text only.
            record.exc_text, record.exc_info = clean, None
    elif record.exc_text:
        record.exc_text = redactor.redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redactor.redact(record.stack_info)


_installed: Callable[..., logging.LogRecord] | None = None


def install_outbound_gate() -> None:
    """Make every log record of the process pass the gate (idempotent)."""
    global _installed
    if _installed is not None and logging.getLogRecordFactory() is _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        redact_record(record, _SECRETS.redactor)
        return record

    _installed = factory
    logging.setLogRecordFactory(factory)
