"""Keeping python-telegram-bot's raw traffic out of the logs.

The bot token and every credential the host knows are removed from every log record by the
host's outbound gate (``playa.core.outbound_secrets``); this module handles what that gate
cannot know: the raw updates, which quote a key before anything has recognised it as one.
"""

from __future__ import annotations

import logging

__all__ = ["quiet_raw_traffic"]


def quiet_raw_traffic() -> None:
    """Keep python-telegram-bot's DEBUG records out of every log: they are the raw updates.

    At DEBUG it logs every update it receives and every request it makes, verbatim: an
    ``/mcp_add … --bearer KEY``, a secret answer, a key edited into a message. Redaction cannot
    know a key the bot has not yet recognised, so those records are not made at all.
    """
    raw = logging.getLogger("telegram")
    if raw.getEffectiveLevel() < logging.INFO:
        raw.setLevel(logging.INFO)
