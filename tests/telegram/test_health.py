"""``/healthz`` and ``/metrics`` on a real ``playa telegram`` process's listener.

The process runs against the fake Bot API (by webhook, and by long polling with the login
redirect's own listener), with a real MCP server behind a bearer token and the offline model,
which calls the tool a message names. ``/metrics`` is parsed strictly as Prometheus's text
format 0.0.4 (``support.prometheus``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.applications import Starlette

from playa.db import upgrade_database
from playa.telegram import Operations
from servers.python_servers import serve_asgi, serve_mcp
from support.postgres import FAST, running_postgres
from support.prometheus import parse_exposition

from .fake_bot_api import FakeBotApi, private_chat, user
from .process import free_port, run_bot_process, stopped

pytestmark = pytest.mark.anyio

TOKEN = "123456789:AAHfakeTokenForTestsOnly0123456789abcd"
WAIT = 60.0
"""Bounds each wait on a healthy process or server (a busy two-core machine)."""


def echo_server() -> MCPServer:
    server = MCPServer("echo")

    @server.tool()
    def echo(text: str) -> str:
        """Says the text back."""
        return f"echo: {text}"

    @server.tool()
    def broken() -> str:
        """Always fails."""
        raise ToolError("broken on purpose")

    return server


async def get(client: httpx.AsyncClient, url: str) -> httpx.Response:
    """GET ``url``; a listener still starting (connection refused) is asked again, within WAIT."""
    with anyio.fail_after(WAIT):
        while True:
            try:
                return await client.get(url)
            except httpx.ConnectError:
                await anyio.sleep(0.05)


@asynccontextmanager
async def bot_with_listener(
    tmp_path: Path, fake: FakeBotApi, api_url: str, mode: str, extra_env: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, Any]]:
    """``playa telegram`` by ``mode``; yields the root URL of its listener and the process.

    ``polling``: long polling with a public URL, whose login redirect the listener serves;
    ``listen``: long polling with ``PLAYA_LISTEN`` alone, a listener for the two endpoints.
    """
    port = free_port()
    env = dict(extra_env or {})
    if mode == "polling":
        env |= {"PLAYA_PUBLIC_URL": "http://127.0.0.1:1/", "PLAYA_LISTEN": f"127.0.0.1:{port}"}
    elif mode == "listen":
        env |= {"PLAYA_LISTEN": f"127.0.0.1:{port}"}
    async with (
        anyio.create_task_group() as delivery,
        run_bot_process(
            TOKEN,
            api_url,
            tmp_path / "data",
            tmp_path / "stderr.log",
            webhook_port=port if mode == "webhook" else None,
            extra_env=env,
        ) as process,
    ):
        if mode == "webhook":
            delivery.start_soon(fake.post_to_webhook)
        await fake.wait_call("setWebhook" if mode == "webhook" else "getUpdates", timeout=WAIT)
        yield f"http://127.0.0.1:{port}", process
        assert await stopped(process) == 0
        delivery.cancel_scope.cancel()


@pytest.mark.parametrize("mode", ["webhook", "polling"])
async def test_the_listener_answers_health_and_counts_turns_and_calls_by_server_without_a_secret(
    tmp_path: Path, mode: str
) -> None:
    bearer = f"Zq7Xw3KpL9mN2vB8{secrets.token_hex(12)}"
    fake = FakeBotApi(TOKEN)
    async with (
        serve_asgi(fake.app()) as api,
        serve_mcp(echo_server(), bearer=bearer) as mcp,
        bot_with_listener(tmp_path, fake, api.url, mode) as (root, _),
        httpx.AsyncClient(trust_env=False, timeout=WAIT) as client,
    ):
        health = await get(client, root + "/healthz")
        assert (health.status_code, health.text) == (200, "ok\n")
        assert health.headers["cache-control"] == "no-store"

        fake.send(private_chat(7), f"/mcp_add docs {mcp.url} --bearer {bearer}", sender=user(7))
        await fake.wait_reply(7, "Added docs", timeout=WAIT)
        fake.send(private_chat(7), 'docs__echo {"text": "hello"}', sender=user(7))
        await fake.wait_reply(7, "echo: hello", timeout=WAIT)
        fake.send(private_chat(7), "docs__broken {}", sender=user(7))
        await fake.wait_reply(7, "broken on purpose", timeout=WAIT)

        # A reply behind Telegram's flood control waits in the outbox.
        fake.flood[8] = 30
        fake.send(private_chat(8), "/help", sender=user(8))
        await fake.wait_call("sendMessage", chat_id=8, ok=False, timeout=WAIT)
        scraped = await get(client, root + "/metrics")
        assert scraped.status_code == 200
        assert scraped.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        samples, types = parse_exposition(scraped.text)

    docs = frozenset({("server", "docs")})
    assert samples[("playa_tool_calls_total", docs)] == 2
    assert samples[("playa_tool_errors_total", docs)] == 1
    assert samples[("playa_turns_total", frozenset())] == 2  # the command is no turn
    assert samples[("playa_chats_held", frozenset())] == 2
    assert samples[("playa_outbox_depth", frozenset())] == 1
    assert samples[("playa_lease_moves_total", frozenset())] == 0  # one process, no database
    assert types == {
        "playa_lease_moves_total": "counter",
        "playa_chats_held": "gauge",
        "playa_outbox_depth": "gauge",
        "playa_turns_total": "counter",
        "playa_tool_calls_total": "counter",
        "playa_tool_errors_total": "counter",
    }
    # Counts and server names only: no credential of the chat or the bot, no address.
    for secret in (bearer, bearer[:16], TOKEN, TOKEN.partition(":")[2], mcp.url, "127.0.0.1"):
        assert secret not in scraped.text


async def test_health_says_503_database_when_its_database_stopped(tmp_path: Path) -> None:
    fake = FakeBotApi(TOKEN)
    database = running_postgres(settings=FAST)
    server = await anyio.to_thread.run_sync(database.__enter__)
    running = True
    try:
        url = server.url()
        env = {"PLAYA_DATABASE_URL": url, "MCP_ENCRYPTION_SECRET": secrets.token_hex(32)}
        await upgrade_database(env)
        async with (
            serve_asgi(fake.app()) as api,
            bot_with_listener(tmp_path, fake, api.url, "listen", env) as (root, _),
            httpx.AsyncClient(trust_env=False, timeout=WAIT) as client,
        ):
            health = await get(client, root + "/healthz")
            assert (health.status_code, health.text) == (200, "ok\n")

            running = False
            await anyio.to_thread.run_sync(database.__exit__, None, None, None)
            # The check's own bound (2 s) answers, not the pool's 10 s connect timeout; the
            # bound here is generous for a busy machine, and still below that timeout's sum.
            with anyio.fail_after(8):
                health = await client.get(root + "/healthz")
            assert (health.status_code, health.text) == (503, "database\n")
            assert server.password not in health.text and str(server.port) not in health.text
    finally:
        if running:
            await anyio.to_thread.run_sync(database.__exit__, None, None, None)


async def test_a_database_that_never_answers_is_503_once_the_checks_bound_is_over() -> None:
    waited = anyio.Event()

    async def hangs() -> None:
        waited.set()
        await anyio.sleep_forever()

    app = Starlette(routes=Operations(probe=hangs, probe_timeout=0.2).routes())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://playa") as client:
        started = anyio.current_time()
        with anyio.fail_after(WAIT):
            health = await client.get("/healthz")
    assert waited.is_set()
    assert (health.status_code, health.text) == (503, "database\n")
    assert anyio.current_time() - started >= 0.2  # it did wait for the database, its bound long


async def test_a_failing_database_check_shows_one_word_and_logs_no_error_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    where = "postgresql://playa:db-password-value@db.internal:5432/playa"

    async def refused() -> None:
        raise OSError(f"cannot connect to {where}")

    app = Starlette(routes=Operations(probe=refused).routes())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://playa") as client:
        with anyio.fail_after(WAIT):
            health = await client.get("/healthz")
    assert (health.status_code, health.text) == (503, "database\n")
    assert "db.internal" not in caplog.text and "OSError" in caplog.text
