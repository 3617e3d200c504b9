"""Two bot processes on one database: each chat is served by the process holding its lease.

In one test process, two hosts (each its own data dir and pool, as two processes have) run the
bot against one fake Bot API, by webhook, each on its own port; the fake's ``proxy`` picks which
one receives an update, as a load balancer does. A real PostgreSQL; a model that echoes.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from tests.telegram.fake_bot_api import FakeBotApi, private_chat, user

from playa.agent import Host
from playa.db import Database, DatabaseStorage, DatabaseUrl, upgrade
from playa.telegram import (
    INTERRUPTED,
    Journal,
    Serving,
    TelegramSettings,
    WebhookConfig,
    bot_id,
    run_telegram,
    webhook_secret,
)
from servers.python_servers import serve_asgi
from support.cli_host import cli_host
from support.postgres import database_url, postgres

__all__ = ["database_url", "postgres"]

pytestmark = pytest.mark.anyio

TOKEN = "123456789:AAHfakeTokenForSharedChats0123456789ab"
WAIT = 60.0
LEASE = 1.0
"""Short, so that a takeover is quick; only the takeover tests wait for one to expire."""


SEEN: list[str] = []
"""Every prompt part the echoing model was given, in every test of this module."""


def _echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    SEEN.extend(str(part) for message in messages for part in getattr(message, "parts", []))
    asked = [
        part.content
        for message in messages
        for part in getattr(message, "parts", [])
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    return ModelResponse(parts=[TextPart(f"echo: {asked[-1].split(chr(10))[-1] if asked else ''}")])


@dataclass
class Process:
    """One bot process: its host, its port, and its running task's scope."""

    host: Host
    port: int
    scope: anyio.CancelScope

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


@asynccontextmanager
async def bot_process(
    fake: FakeBotApi, api_url: str, url: str, folder: Path, tg: anyio.abc.TaskGroup
) -> AsyncIterator[Process]:
    """A host on its own pool of the database at ``url``, serving the bot by webhook."""
    async with AsyncExitStack() as stack:
        database = await stack.enter_async_context(await Database.open(DatabaseUrl.parse(url)))
        storage = DatabaseStorage(database)
        environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "PLAYA_EGRESS_ALLOW": "127.0.0.1/32"}
        host = await stack.enter_async_context(
            cli_host(folder, environ, console=False, model=FunctionModel(_echo), storage=storage)
        )
        webhook = WebhookConfig(
            url="http://127.0.0.1:1/hook", listen="127.0.0.1", port=0, secret_token=webhook_secret(TOKEN)
        )
        ports: list[int] = []
        listening = anyio.Event()

        def heard(port: int) -> None:
            ports.append(port)
            listening.set()

        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                await run_telegram(
                    host,
                    token=TOKEN,
                    base_url=api_url,
                    settings=TelegramSettings(poll_timeout=5, lease_seconds=LEASE),
                    serving=Serving(webhook=webhook, listening=heard),
                    storage=storage,
                )

        done = anyio.Event()

        async def running() -> None:
            try:
                await run()
            finally:
                done.set()

        tg.start_soon(running)
        with anyio.fail_after(WAIT):
            await listening.wait()
        try:
            yield Process(host, ports[0], scope)
        finally:
            scope.cancel()
            with anyio.fail_after(WAIT):
                await done.wait()


@asynccontextmanager
async def served_api() -> AsyncIterator[tuple[FakeBotApi, str, anyio.abc.TaskGroup]]:
    """The fake Bot API, served and posting its updates to the webhook its ``proxy`` names: it, its
    URL, and the task group the bot processes run in. Closed on exit."""
    fake = FakeBotApi(TOKEN)
    async with serve_asgi(fake.app()) as api, anyio.create_task_group() as tg:
        tg.start_soon(fake.post_to_webhook)
        yield fake, api.url, tg
        fake.close()
        tg.cancel_scope.cancel()


@asynccontextmanager
async def two_processes(shared: str, tmp_path: Path) -> AsyncIterator[tuple[FakeBotApi, Process, Process]]:
    """The fake Bot API, and two bot processes on the database at ``shared`` that serve it."""
    async with (
        served_api() as (fake, api_url, tg),
        bot_process(fake, api_url, shared, tmp_path / "a", tg) as a,
        bot_process(fake, api_url, shared, tmp_path / "b", tg) as b,
    ):
        yield fake, a, b


@pytest.fixture
async def shared(database_url: str) -> str:
    """This test's database, at the latest schema."""
    async with await Database.open(DatabaseUrl.parse(database_url)) as database:
        await upgrade(database)
    return database_url


def replies(fake: FakeBotApi, chat_id: int) -> list[str]:
    return [text for text in fake.texts(chat_id) if text.startswith("echo: ") or text == INTERRUPTED]


async def wait_replies(fake: FakeBotApi, chat_id: int, count: int) -> list[str]:
    with anyio.fail_after(WAIT):
        while len(replies(fake, chat_id)) < count:
            await fake.wait_call("sendMessage", chat_id=chat_id, after=len(fake.calls), timeout=WAIT)
    return replies(fake, chat_id)


async def test_a_message_received_by_another_process_is_answered_by_the_chats_holder_once_in_order(
    shared: str, tmp_path: Path
) -> None:
    async with two_processes(shared, tmp_path) as (fake, a, b):
        me = user(41)
        fake.proxy = a.url
        fake.send(private_chat(41), "one", sender=me)
        assert await wait_replies(fake, 41, 1) == ["echo: one"]
        # Nobody held the chat: the processes raced for it, and one serves it.
        holder, other = (a, b) if a.host.open_sessions else (b, a)
        assert (holder.host.open_sessions, other.host.open_sessions) == (1, 0)

        # The other receives the chat's next messages; the holder answers them, in order.
        fake.proxy = other.url
        for text in ("two", "three", "four"):
            fake.send(private_chat(41), text, sender=me)
        assert await wait_replies(fake, 41, 4) == ["echo: one", "echo: two", "echo: three", "echo: four"]
        assert other.host.open_sessions == 0  # it never served the chat: no session, no servers

        fake.send(private_chat(42), "hello", sender=user(42))
        assert await wait_replies(fake, 42, 1) == ["echo: hello"]
        assert a.host.open_sessions + b.host.open_sessions == 2

        # The holder stops (gracefully: its leases are released at once); the other takes the chat.
        holder.scope.cancel()
        fake.send(private_chat(41), "five", sender=me)
        assert (await wait_replies(fake, 41, 5))[-1] == "echo: five"
    assert replies(fake, 41) == ["echo: one", "echo: two", "echo: three", "echo: four", "echo: five"]


async def test_a_dead_holders_chat_is_taken_over_with_its_replies_then_its_cut_turn_then_the_rest(
    shared: str, tmp_path: Path
) -> None:
    """What a process killed mid-work leaves: a reply not yet delivered, a turn cut short, a
    message not yet handled, and its lease. Another process takes the chat once the lease expires."""
    chat = 51
    async with await Database.open(DatabaseUrl.parse(shared)) as database:
        storage = DatabaseStorage(database)
        inbox = Journal.in_rows(storage.inbox, TOKEN, "inbox")
        outbox = Journal.in_rows(storage.outbox, TOKEN, "outbox")
        message = {
            "message_id": 7,
            "date": 0,
            "chat": private_chat(chat),
            "from": user(chat),
            "text": "later",
        }
        await outbox.put(
            f"{time.time_ns():020d}-000000",
            chat,
            {
                "chat_id": chat,
                "parts": [{"text": "echo: the reply it wrote", "entities": []}],
                "answers": "x",
            },
        )
        await inbox.put("00000000000000000005", chat, {"started": True, "chat_id": chat, "message_id": 5})
        await inbox.put("00000000000000000006", chat, {"started": True, "chat_id": chat, "message_id": 6})
        await inbox.put("x", chat, {"started": True, "chat_id": chat, "message_id": 4})  # answered
        await inbox.put("00000000000000000009", chat, {"update": {"update_id": 9, "message": message}})
        assert await storage.leases.take(bot_id(TOKEN), str(chat), "dead:1:0", 0.5) == "new"

    async with served_api() as (fake, api_url, tg):
        started = anyio.current_time()
        async with bot_process(fake, api_url, shared, tmp_path / "b", tg):
            got = await wait_replies(fake, chat, 4)
            took = anyio.current_time() - started
    assert got == ["echo: the reply it wrote", INTERRUPTED, INTERRUPTED, "echo: later"]
    assert took < 0.5 + LEASE + WAIT  # bounded; the failover bench measures it


async def test_a_key_sent_to_a_process_that_does_not_hold_the_chat_is_deleted_and_never_reaches_the_model(
    shared: str, tmp_path: Path
) -> None:
    """The holder classifies what another process received, as if it had received it itself."""
    key = "sk-proj-" + "Q7vX2mN9pL4kR8sT1wY6zA3b"
    async with two_processes(shared, tmp_path) as (fake, a, b):
        me = user(61)
        fake.proxy = a.url
        fake.send(private_chat(61), "hello", sender=me)
        assert await wait_replies(fake, 61, 1) == ["echo: hello"]
        other = b if a.host.open_sessions else a  # the process that does not hold the chat
        fake.proxy = other.url
        sent = fake.send(private_chat(61), key, sender=me)
        fake.send(private_chat(61), f"my key is {key} thanks", sender=me)
        await fake.wait_call("deleteMessage", chat_id=61, message_id=sent, timeout=WAIT)
        await fake.wait_reply(61, "looks like a key", timeout=WAIT)
        assert await wait_replies(fake, 61, 2)
        assert other.host.open_sessions == 0
    assert not any(key in seen for seen in SEEN)
    assert all(key not in text for text in fake.texts(61))
