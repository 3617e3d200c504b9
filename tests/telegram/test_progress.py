"""Long calls in Telegram: progress in the turn's live message, within its rate; late task results (npm)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from playa.telegram._live import LiveSettings
from servers.node import server_everything
from servers.python_servers import serve_asgi
from support.cli_host import cli_host
from support.telegram import bot_running

from .fake_bot_api import FakeBotApi, private_chat, user

pytestmark = [pytest.mark.anyio, pytest.mark.npm]

TOKEN = "123456789:AAHfakeTokenForTestsOnly0123456789abcd"
CHAT = 301
OPERATION = "everything__trigger-long-running-operation"
RESEARCH = "everything__simulate-research-query"


@asynccontextmanager
async def bot_with_everything(tmp_path: Path, env: dict[str, str]) -> AsyncIterator[FakeBotApi]:
    """The bot against a fake Bot API, its chat with server-everything added."""
    fake = FakeBotApi(TOKEN)
    environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "PLAYA_EGRESS_ALLOW": "127.0.0.1/32", **env}
    async with (
        server_everything() as url,
        serve_asgi(fake.app()) as api,
        cli_host(tmp_path, environ, console=False) as host,
        bot_running(fake, host, api.url),
    ):
        try:
            mark = fake.mark()
            fake.send(private_chat(CHAT), f"/mcp_add everything {url}", sender=user(CHAT))
            await fake.wait_reply(CHAT, "Added everything: connected", after=mark, timeout=30)
            yield fake
        finally:
            fake.close()


async def test_a_calls_progress_shows_in_the_turns_draft_within_its_rate(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with bot_with_everything(tmp_path, {"PLAYA_CALL_TIMEOUT": "30"}) as fake:
            mark = fake.mark()
            fake.send(private_chat(CHAT), f'{OPERATION} {{"duration": 6, "steps": 12}}', sender=user(CHAT))
            await fake.wait_reply(CHAT, "Long running operation completed", after=mark, timeout=30)
    # The turn's live message shows it (a private chat's draft): no message of its own.
    assert not [
        call for call in fake.find("sendMessage", after=mark) if call.text.startswith(f"{OPERATION}: ")
    ]
    drafts = fake.find("sendMessageDraft", after=mark, chat_id=CHAT)
    assert any(call.text.startswith(f"{OPERATION}: ") and call.text.endswith("/12") for call in drafts)
    # Twelve reports in six seconds, each draft at least the draft rate after the one before.
    times = [call.at for call in drafts]
    every = LiveSettings().draft_every
    assert all(later - earlier >= every - 0.05 for earlier, later in itertools.pairwise(times))
    assert 2 <= len(drafts) <= 6 / every + 2


async def test_a_task_that_outlives_the_turn_is_posted_to_the_chat_when_done(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with bot_with_everything(tmp_path, {"PLAYA_CALL_TIMEOUT": "1"}) as fake:
            mark = fake.mark()
            fake.send(private_chat(CHAT), f'{RESEARCH} {{"topic": "tides"}}', sender=user(CHAT))
            running = await fake.wait_reply(
                CHAT, "is still running on its server as a task", after=mark, timeout=30
            )
            late = await fake.wait_reply(CHAT, "Research Report: tides", after=mark, timeout=30)
    assert late.at > running.at
    assert late.text.startswith(f"The task of {RESEARCH} (task ")
