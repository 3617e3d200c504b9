"""Receiving updates by long polling: ``getUpdates`` in a loop, each update taken before the offset moves."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
from telegram import Bot, Update
from telegram.error import Conflict, Forbidden, InvalidToken, RetryAfter, TelegramError

from ..exceptions import ConfigError
from ._outbox import retry_seconds

__all__ = ["ALLOWED_UPDATES", "Poller"]

logger = logging.getLogger(__name__)

ALLOWED_UPDATES: Final = ("message", "edited_message", "callback_query")
"""New messages; edits, so that a key edited into a message is deleted; button presses."""
_BACKOFF_MAX: Final = 30.0


class Poller:
    """Long polling of one bot: ``run`` takes updates until cancelled; ``confirm`` tells
    Telegram which were taken."""

    def __init__(self, bot: Bot, *, timeout: float) -> None:
        self._bot = bot
        self._timeout = timeout
        self.offset: int | None = None
        """The next update id to ask for; everything before it has been taken."""

    async def run(self, take: Callable[[Update], Awaitable[None]]) -> None:
        """Poll until cancelled; ``take`` returns once an update is handled or sealed."""
        try:
            await self._bot.delete_webhook()
        except TelegramError as exc:
            logger.warning("removing the webhook failed: %s", exc)
        failures = 0
        while True:
            try:
                updates = await self._bot.get_updates(
                    offset=self.offset,
                    timeout=int(self._timeout),
                    allowed_updates=list(ALLOWED_UPDATES),
                )
            except (InvalidToken, Forbidden):
                raise ConfigError("Telegram refused the bot token (TELEGRAM_BOT_TOKEN)") from None
            except RetryAfter as exc:
                await anyio.sleep(retry_seconds(exc))
                continue
            except TelegramError as exc:
                failures += 1
                wait = min(_BACKOFF_MAX, 2.0 ** min(failures, 5))
                if isinstance(exc, Conflict):
                    logger.error(
                        "another instance of this bot is polling (%s); retrying in %.0f s", exc, wait
                    )
                else:
                    logger.warning("getUpdates failed: %s; retrying in %.0f s", exc, wait)
                await anyio.sleep(wait)
                continue
            failures = 0
            for update in updates:
                # Not cancelled half-way: the update is sealed, then counted as taken.
                with anyio.CancelScope(shield=True):
                    await take(update)
                    self.offset = update.update_id + 1

    async def confirm(self) -> None:
        """Tell Telegram the updates taken so far (handled, or sealed in the inbox) are done."""
        if self.offset is None:
            return
        try:
            await self._bot.get_updates(offset=self.offset, timeout=0, limit=1)
        except TelegramError as exc:
            logger.info("confirming the last updates failed: %s", exc)
