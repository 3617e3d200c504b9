"""No reply dropped: a real ``playa telegram`` process stopped by SIGTERM mid-turn and behind flood control,
receiving updates by long polling and by webhook.

The process runs against the fake Bot API and an MCP server whose tool waits until the test
lets it go, so a turn is certainly running when the signal comes.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from servers.python_servers import serve_asgi, serve_mcp

from .fake_bot_api import FakeBotApi, private_chat, user
from .process import free_port, run_bot_process, stopped

TOKEN = "123456789:AAHfakeTokenForTestsOnly0123456789abcd"
SECRET_KEY = "sk-live-7Hq2Zx9Lm4Vb8Nc1Rt6Yw3Pd"
BEARER_KEY = "Zq7Xw3KpL9mN2vB8cR4tY6uI0oPa"


def slow_server(started: anyio.Event) -> MCPServer:
    server = MCPServer("slow")

    @server.tool()
    async def wait() -> str:
        """Waits until the test ends."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    return server


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["polling", "webhook"])
async def test_replies_survive_a_sigterm_mid_turn_and_behind_flood_control_exactly_once(
    tmp_path: Path, mode: str
) -> None:
    fake = FakeBotApi(TOKEN)
    started = anyio.Event()
    stderr = tmp_path / "stderr.log"
    # In webhook mode the fake posts each update until the bot answers 200, as Telegram does,
    # also while the bot is down: the restarted bot listens on the same port.
    port = free_port() if mode == "webhook" else None
    bot_process = partial(run_bot_process, TOKEN, webhook_port=port)
    async with (
        serve_asgi(fake.app()) as api,
        serve_mcp(slow_server(started)) as mcp,
        anyio.create_task_group() as delivery,
    ):
        if port is not None:
            delivery.start_soon(fake.post_to_webhook)
        async with bot_process(api.url, tmp_path / "data", stderr) as process:
            await fake.wait_call("setWebhook" if port else "getUpdates", timeout=30)
            busy, flooded, waiting = private_chat(11), private_chat(12), private_chat(13)
            fake.send(busy, f"/mcp_add slow {mcp.url}", sender=user(11))
            await fake.wait_reply(11, "Added slow", timeout=30)

            turn_id = fake.send(busy, "slow__wait {}", sender=user(11))
            queued_id = fake.send(busy, "/help", sender=user(11))  # waits behind the running turn
            with anyio.fail_after(30):
                await started.wait()
            # A secret answer that arrives with nothing asking must not reach the model, a log or a file.
            fake.send(waiting, SECRET_KEY, sender=user(13))
            await fake.wait_reply(13, "looks like a key")
            # A key inside a command: python-telegram-bot's DEBUG records would quote the update.
            fake.send(waiting, f"/mcp_add keyed {mcp.url} --bearer {BEARER_KEY}", sender=user(13))
            await fake.wait_reply(13, "Added keyed", timeout=30)

            fake.flood[12] = 30
            fake.send(flooded, "/help", sender=user(12))
            await fake.wait_call("sendMessage", chat_id=12, ok=False)
            assert await stopped(process) == 0

        flood_mark = fake.mark()
        del fake.flood[12]
        async with bot_process(api.url, tmp_path / "data", stderr) as process:
            await fake.wait_reply(12, "Commands:", after=flood_mark, timeout=30)
            note = await fake.wait_reply(11, "restarted while working", timeout=30)
            assert note.params["reply_parameters"]["message_id"] == turn_id
            helped = await fake.wait_reply(11, "Commands:", after=flood_mark, timeout=30)
            assert helped.at > note.at  # in the chat's order
            # Nothing more is pending: a new message is answered after everything resumed.
            mark = fake.mark()
            fake.send(flooded, "/help", sender=user(12))
            await fake.wait_reply(12, "Commands:", after=mark)
            assert await stopped(process) == 0
        delivery.cancel_scope.cancel()

    assert len([t for t in fake.texts(12) if t.startswith("Commands:")]) == 2
    assert len([t for t in fake.texts(11) if "restarted while working" in t]) == 1
    assert len([t for t in fake.texts(11) if t.startswith("Commands:")]) == 1
    assert queued_id != turn_id
    if port is not None:
        assert not fake.find("getUpdates")  # every update came through the webhook
    log = stderr.read_text(errors="replace")
    assert "DEBUG httpcore" in log  # the libraries did log at DEBUG
    assert TOKEN not in log
    assert SECRET_KEY not in log
    assert BEARER_KEY not in log
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert SECRET_KEY.encode() not in path.read_bytes(), path
            assert BEARER_KEY.encode() not in path.read_bytes(), path
