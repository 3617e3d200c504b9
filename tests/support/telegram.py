"""Playa's Telegram front end run against the fake Bot API, as the tests start it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

import anyio
from tests.telegram.fake_bot_api import FakeBotApi

from playa.agent import Host
from playa.telegram import TelegramSettings, WebhookConfig, run_telegram

FAST = TelegramSettings(poll_timeout=5, typing_interval=0.5)
"""Short polls, so that a stop is quick; "typing…" often enough to be seen."""


@asynccontextmanager
async def bot_running(
    fake: FakeBotApi,
    host: Host,
    api_url: str,
    *,
    settings: TelegramSettings = FAST,
    webhook: WebhookConfig | None = None,
    listening: Callable[[int], None] | None = None,
) -> AsyncIterator[None]:
    """``host``'s chats on Telegram through the fake served at ``api_url``: ready once the bot polls
    (with a webhook, once it is registered); stopped when the block ends."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            partial(
                run_telegram,
                host,
                token=fake.token,
                base_url=api_url,
                webhook=webhook,
                settings=settings,
                listening=listening,
            )
        )
        await fake.wait_call("setWebhook" if webhook else "getUpdates")
        try:
            yield
        finally:
            tg.cancel_scope.cancel()
