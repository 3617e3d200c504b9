"""Playa's Telegram front end run against the fake Bot API, as the tests start it: alone
(``bot_running``), or with a host and a demo MCP server to connect to (``running_bot``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai.models import Model
from tests.telegram.fake_bot_api import ApiCall, FakeBotApi, private_chat, user

from playa.agent import Host
from playa.telegram import Serving, TelegramSettings, WebhookConfig, run_telegram
from servers.python_servers import serve_asgi
from support.cli_host import cli_host
from support.remote import demo_server

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
                settings=settings,
                serving=Serving(webhook=webhook, listening=listening),
            )
        )
        await fake.wait_call("setWebhook" if webhook else "getUpdates")
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


TOKEN = "123456789:AAHfakeTokenForTestsOnly0123456789abcd"


DEMO_TOKEN = "demo-secret-token-5c1f0e8a9b7d"


OWNER_ANSWER_PROMPT = "Send the bearer token"


@dataclass
class Running:
    """The bot, its fake Bot API, the demo MCP server's URL and the host."""

    fake: FakeBotApi
    mcp_url: str
    host: Host


@asynccontextmanager
async def running_bot(
    tmp_path: Path,
    *,
    webhook: WebhookConfig | None = None,
    listening: Any = None,
    model: Model | str = "offline",
    environ: dict[str, str] | None = None,
    settings: TelegramSettings = FAST,
) -> AsyncIterator[Running]:
    """The bot running against a fake Bot API, with a demo MCP server to connect to.

    ``environ`` adds to the environment the extension is configured from.
    """
    fake = FakeBotApi(TOKEN)
    environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "PLAYA_EGRESS_ALLOW": "127.0.0.1/32", **(environ or {})}
    async with (
        serve_asgi(fake.app()) as api,
        demo_server(DEMO_TOKEN) as demo,
        cli_host(tmp_path, environ, console=False, model=model) as host,
        bot_running(fake, host, api.url, webhook=webhook, listening=listening, settings=settings),
    ):
        try:
            yield Running(fake, demo.url, host)
        finally:
            fake.close()


def sent_texts(fake: FakeBotApi) -> list[str]:
    return [call.text for call in fake.calls if call.method == "sendMessage"]


async def demo_added(bot: Running, chat_id: int, *, slash: str = "/") -> tuple[int, ApiCall]:
    """The owner of the private chat ``chat_id`` adds the demo server with its bearer token in the
    command, which starts with ``slash``: the command's message id, and the reply that added it."""
    me = user(chat_id)
    sent = bot.fake.send(
        private_chat(chat_id), f"{slash}mcp_add demo {bot.mcp_url} --bearer {DEMO_TOKEN}", sender=me
    )
    return sent, await bot.fake.wait_reply(chat_id, "Added demo")
