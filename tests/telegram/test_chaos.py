"""Several real ``playa telegram`` processes serve one bot on PostgreSQL while they are killed.

Webhook mode: three processes behind a round-robin proxy (``support.balancer``), the fake Bot
API posting every update until some process answers 200, as Telegram does. Messages come to
many chats at a steady pace while, every few seconds, one process is killed with SIGKILL and
started again. Most chats have a real MCP server behind a bearer key; their messages name its
tool to the offline model (``echo__echo {"text": "c3 m7"}``), so every reply says which message
it answers. Afterwards every message is answered exactly once, by its reply or by the
"interrupted" notice, in order per chat, but for a part a kill sent again (docs/deploy.md); every
server is still listed; no table and no log holds the bearer key or the bot token in clear.

Polling mode: two processes; the poller (the advisory lock's holder) is killed, and the other
takes over polling and answers within ``PLAYA_LEASE_SECONDS`` + 2 s.

The sizes are small by default so that the normal suite stays quick on two cores;
``PLAYA_CHAOS_CHATS`` / ``PLAYA_CHAOS_MESSAGES`` set them (``PLAYA_CHAOS_CHATS=100
PLAYA_CHAOS_MESSAGES=1000`` is the full run).
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import pytest
from anyio.abc import Process
from mcp.server.mcpserver import MCPServer

from playa.db import Database, DatabaseUrl
from servers.python_servers import serve_asgi, serve_mcp
from support.balancer import serve_balancer
from support.db_text import database_text
from support.postgres import FAST, Postgres, running_postgres

from .fake_bot_api import ApiCall, FakeBotApi, private_chat, user
from .process import free_port, run_bot_process, stopped

pytestmark = pytest.mark.anyio

TOKEN = "123456789:AAHfakeTokenForTestsOnly0123456789abcd"
WAIT = 60.0
"""Bounds each wait on a healthy process or server (a busy two-core machine)."""
CHATS = int(os.environ.get("PLAYA_CHAOS_CHATS", "20"))
MESSAGES = int(os.environ.get("PLAYA_CHAOS_MESSAGES", "200"))
PACE = 0.1
"""Seconds between two messages."""
KILL_EVERY = 3.0
"""Seconds between two kills."""
LEASE_SECONDS = 3
CRASH_WINDOW = 1.0
"""Seconds from Telegram's accept of a part to the outbox's record of it, at the most on a busy
two-core machine (a database round trip, and the event loop's turn to make it). Only a kill in
that window sends a part again (docs/deploy.md), so a part sent twice must have been accepted
that shortly before a kill; each part in flight at a kill has its window."""
IN_FLIGHT = 0.25
"""Seconds after a kill in which the fake Bot API may still take a request the killed process
wrote before it: the test's one event loop both kills and answers."""
NOTICE = "restarted while working"
_ECHOED = re.compile(r"echo: c(\d+) m(\d+)$")


def echo_server() -> MCPServer:
    server = MCPServer("echo")

    @server.tool()
    def echo(text: str) -> str:
        """Says the text back."""
        return f"echo: {text}"

    return server


def has_server(chat: int) -> bool:
    """Three chats in four have the MCP server; the others talk to the offline model alone."""
    return chat % 4 != 3


@asynccontextmanager
async def database(tmp_path: Path) -> AsyncIterator[tuple[Postgres, str]]:
    """A PostgreSQL of this test's own, upgraded by ``playa db upgrade`` as an operator does."""
    server = running_postgres(settings=FAST)
    running = await anyio.to_thread.run_sync(server.__enter__)
    try:
        url = running.url()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYA_", "TELEGRAM_", "MCP_"))}
        with anyio.fail_after(WAIT):
            done = await anyio.run_process(
                [sys.executable, "-m", "playa", "db", "upgrade"],
                env={**env, "PLAYA_DATABASE_URL": url, "PLAYA_DATA_DIR": str(tmp_path / "upgrade")},
                check=False,
            )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        yield running, url
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(server.__exit__, None, None, None)


@dataclass
class Fleet:
    """The bot's processes, each started again whenever it exits, until ``stop``."""

    tmp_path: Path
    api_url: str
    env: dict[str, str]
    webhook_url: str | None
    ports: list[int | None]
    processes: dict[int, Process] = field(default_factory=dict)
    starts: Counter[int] = field(default_factory=Counter)
    killed_at: list[float] = field(default_factory=list)
    """When each kill was sent (``time.monotonic``, the fake Bot API's clock)."""
    stopping: bool = False

    def log(self, slot: int) -> Path:
        return self.tmp_path / f"stderr-{slot}.log"

    async def keep(
        self, slot: int, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        started = False
        while not self.stopping:
            async with run_bot_process(
                TOKEN,
                self.api_url,
                self.tmp_path / f"data-{slot}",
                self.log(slot),
                webhook_port=self.ports[slot],
                webhook_url=self.webhook_url,
                extra_env=self.env,
            ) as process:
                self.processes[slot] = process
                self.starts[slot] += 1
                if not started:
                    started = True
                    task_status.started()
                await process.wait()

    def kill(self, slot: int) -> None:
        process = self.processes.get(slot)
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGKILL)
            self.killed_at.append(time.monotonic())

    def since_kill(self, at: float) -> str:
        """``at`` against the last kill before it, for a duplicate's report."""
        before = [k for k in self.killed_at if k <= at]
        return f"{at - before[-1]:.2f} s after a kill" if before else "before any kill"

    def killed_in_window(self, at: float) -> bool:
        """Whether a kill cut the record of a part accepted at ``at``: one came at most
        ``CRASH_WINDOW`` seconds after it, or at most ``IN_FLIGHT`` before it."""
        return any(-IN_FLIGHT <= k - at <= CRASH_WINDOW for k in self.killed_at)

    async def stop(self) -> list[int]:
        """SIGTERM to every process once it is up (a process still starting has no handler for
        it yet); their exit codes."""
        async with httpx.AsyncClient(trust_env=False, timeout=WAIT) as client:
            for port in self.ports:
                await healthy(client, f"http://127.0.0.1:{port}/healthz")
        self.stopping = True
        codes = []
        for process in self.processes.values():
            if process.returncode is None:
                codes.append(await stopped(process))
        return codes


async def healthy(client: httpx.AsyncClient, url: str) -> None:
    """Until ``url`` answers 200: a listener still starting refuses the connection; bounded."""
    with anyio.fail_after(WAIT):
        while True:
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.ConnectError:
                pass
            await anyio.sleep(0.1)


def bot_env(url: str) -> dict[str, str]:
    return {"PLAYA_DATABASE_URL": url, "PLAYA_LEASE_SECONDS": str(LEASE_SECONDS)}


def message_text(chat: int, number: int) -> str:
    if has_server(chat):
        return f'echo__echo {{"text": "c{chat} m{number}"}}'
    return f"c{chat} m{number}"


def answers(
    fake: FakeBotApi, chat: int, sent: dict[int, int], *, after: int, before: int | None = None
) -> list[int]:
    """The numbers of the messages the bot answered in ``chat``, in the order it answered.

    A reply that names its message (an echo) or a notice that replies to it counts for that
    message; a chat without the server gets the offline model's overview, which answers the
    message after the last one answered.
    """
    numbers: list[int] = []
    for call in fake.calls[after:before]:
        if call.method != "sendMessage" or call.chat_id != chat or call.status != 200:
            continue
        if NOTICE in call.text:
            replied = (call.params.get("reply_parameters") or {}).get("message_id")
            numbers.append(sent.get(int(replied), -1) if replied is not None else -1)
        elif (match := _ECHOED.search(call.text.strip())) is not None:
            assert int(match[1]) == chat, call.text
            numbers.append(int(match[2]))
        elif not has_server(chat) and "offline model" in call.text:
            # Answered in order: the message after the last one answered. Its text does not
            # say which message it answers, so a duplicate here is counted, not placed.
            numbers.append(min(numbers[-1] + 1, len(sent) - 1) if numbers else 0)
        else:
            numbers.append(-1)  # something else: shown in the failure
    return numbers


async def wait_answered(
    fake: FakeBotApi, expected: dict[int, int], sent: dict[int, dict[int, int]], after: int
) -> None:
    """Until every chat has as many answers as messages, bounded."""

    def missing() -> dict[int, list[int]]:
        return {
            c: sorted(set(range(n)) - set(answers(fake, c, sent[c], after=after)))
            for c, n in expected.items()
            if not set(range(n)) <= set(answers(fake, c, sent[c], after=after))
        }

    try:
        await fake.wait_until(lambda: not missing(), timeout=WAIT + MESSAGES * 0.5)
    except TimeoutError:
        raise AssertionError(f"messages never answered, by chat: {missing()}") from None


def describe(calls: list[ApiCall]) -> str:
    return "\n".join(f"  {c.chat_id} {c.text[:80]!r}" for c in calls)


async def test_three_processes_killed_in_turn_answer_every_message_once_in_order_and_keep_every_server(
    tmp_path: Path,
) -> None:
    bearer = f"Zq7Xw3KpL9mN2vB8{secrets.token_hex(12)}"
    fake = FakeBotApi(TOKEN)
    ports: list[int | None] = [free_port() for _ in range(3)]
    async with (
        database(tmp_path) as (_, url),
        serve_asgi(fake.app()) as api,
        serve_mcp(echo_server(), bearer=bearer) as mcp,
        serve_balancer([f"http://127.0.0.1:{p}" for p in ports]) as balancer,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(fake.post_to_webhook)
        fleet = Fleet(tmp_path, api.url, bot_env(url), balancer.url + "hook", ports)
        for slot in range(3):
            await tg.start(fleet.keep, slot)
        await fake.wait_call("setWebhook", timeout=WAIT)

        for chat in filter(has_server, range(1, CHATS + 1)):
            fake.send(private_chat(chat), f"/mcp_add echo {mcp.url} --bearer {bearer}", sender=user(chat))
        for chat in filter(has_server, range(1, CHATS + 1)):
            await fake.wait_reply(chat, "Added echo", timeout=WAIT)

        mark = fake.mark()
        sent: dict[int, dict[int, int]] = {chat: {} for chat in range(1, CHATS + 1)}
        count: Counter[int] = Counter()

        async def chaos() -> None:
            slot = 0
            while True:
                await anyio.sleep(KILL_EVERY)
                fleet.kill(slot)
                slot = (slot + 1) % 3

        async with anyio.create_task_group() as killing:
            killing.start_soon(chaos)
            for k in range(MESSAGES):
                chat = k % CHATS + 1
                number = count[chat]
                count[chat] += 1
                message_id = fake.send(private_chat(chat), message_text(chat, number), sender=user(chat))
                sent[chat][message_id] = number
                await anyio.sleep(PACE)
            killing.cancel_scope.cancel()

        await wait_answered(fake, dict(count), sent, mark)

        # Every server added is still there, in whichever process serves the chat now (it may be
        # connecting still, after a move: its calls above show it verifies and answers).
        listed = fake.mark()
        for chat in filter(has_server, range(1, CHATS + 1)):
            fake.send(private_chat(chat), "/mcp", sender=user(chat))
        for chat in filter(has_server, range(1, CHATS + 1)):
            await fake.wait_reply(chat, "MCP servers:\n\necho: ", after=listed, timeout=WAIT)

        codes = await fleet.stop()
        assert codes == [0, 0, 0], codes
        async with await Database.open(DatabaseUrl.parse(url)) as db:
            text = await database_text(db)
        tg.cancel_scope.cancel()

    duplicates: list[str] = []
    unexplained: list[str] = []
    wrong: list[str] = []
    for chat in range(1, CHATS + 1):
        numbers = answers(fake, chat, sent[chat], after=mark, before=listed)
        calls = [c for c in fake.calls[mark:listed] if c.method == "sendMessage" and c.chat_id == chat]
        calls = [c for c in calls if c.status == 200]
        first = [n for i, n in enumerate(numbers) if n not in numbers[:i]]
        if -1 in numbers or sorted(set(numbers)) != list(range(count[chat])) or first != sorted(first):
            wrong.append(f"chat {chat} answered {numbers}:\n{describe(calls)}")
        copies = {
            n: [c for c, m in zip(calls, numbers, strict=True) if m == n]
            for n, times in Counter(numbers).items()
            if times > 1
        }
        duplicates += [
            f"chat {chat} message {n}: "
            + " / ".join(f"{c.text[-30:]!r} {fleet.since_kill(c.at)}" for c in sent_twice)
            for n, sent_twice in copies.items()
        ]
        if not has_server(chat):
            # The offline model's replies are counted, not placed: an extra one shifts the count
            # of those after it. So here each extra reply needs one reply sent in a kill's window.
            extra = len(numbers) - count[chat]
            cut = sum(fleet.killed_in_window(c.at) for c in calls)
            if extra > cut:
                unexplained.append(f"chat {chat}: {extra} replies too many, {cut} sent in a kill's window")
            continue
        # Every copy but the last was sent again: a kill must have cut its record short.
        unexplained += [
            f"chat {chat} message {n}: {c.text[-30:]!r} {fleet.since_kill(c.at)}, and no kill in its window"
            for n, sent_twice in copies.items()
            for c in sent_twice[:-1]
            if not fleet.killed_in_window(c.at)
        ]
    print(
        f"{MESSAGES} messages in {CHATS} chats; {len(fleet.killed_at)} kills, starts {dict(fleet.starts)}; "
        f"spread {dict(balancer.served)}; duplicates: {duplicates or 'none'}"
    )
    assert not wrong, "\n".join(wrong)
    assert len(fleet.killed_at) >= 2
    assert not unexplained, unexplained

    assert "telegram_inbox" in text  # the dump did see the chats' rows
    assert bearer not in text
    assert TOKEN not in text
    for slot in range(3):
        log = fleet.log(slot).read_text(errors="replace")
        assert bearer not in log, slot
        assert TOKEN not in log, slot


async def test_when_the_poller_is_killed_another_process_polls_and_answers_within_a_lease(
    tmp_path: Path,
) -> None:
    fake = FakeBotApi(TOKEN)
    async with database(tmp_path) as (_, url), serve_asgi(fake.app()) as api:
        env = bot_env(url)
        logs = [tmp_path / "stderr-0.log", tmp_path / "stderr-1.log"]
        async with run_bot_process(TOKEN, api.url, tmp_path / "data-0", logs[0], extra_env=env) as poller:
            await fake.wait_call("getUpdates", timeout=WAIT)
            assert "this process is the one poller" in logs[0].read_text()
            async with run_bot_process(TOKEN, api.url, tmp_path / "data-1", logs[1], extra_env=env) as other:
                fake.send(private_chat(5), "/help", sender=user(5))
                await fake.wait_reply(5, "Commands:", timeout=WAIT)
                with anyio.fail_after(WAIT):
                    # Its log is a file, with no event to wait on: it says when the bot is up.
                    while "Telegram bot" not in logs[1].read_text():  # noqa: ASYNC110
                        await anyio.sleep(0.1)
                assert "the one poller" not in logs[1].read_text()

                poller.send_signal(signal.SIGKILL)
                with anyio.fail_after(WAIT):
                    await poller.wait()
                killed = anyio.current_time()
                mark = fake.mark()
                fake.send(private_chat(5), "/help", sender=user(5))
                await fake.wait_reply(5, "Commands:", after=mark, timeout=LEASE_SECONDS + 2)
                took = anyio.current_time() - killed
                assert "this process is the one poller" in logs[1].read_text()
                assert await stopped(other) == 0
    print(f"the other process answered {took:.1f} s after the poller was killed")
