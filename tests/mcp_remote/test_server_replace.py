"""A server's late write of its own entry never undoes the owner's replacement or removal of it.

The old server's write (the pins its first connect adopts, its new tokens, a policy) is held at
the store seam after the server checked it is still the chat's, until the owner's ``/mcp_add``
with a new key, or their ``/mcp_remove``, has landed: the write then reaches the store, which
drops it. With the servers in the sealed file and in PostgreSQL rows.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from playa.core import Storage
from playa.db import Database, DatabaseStorage, DatabaseUrl, upgrade
from playa.mcp_remote import HostSecret
from playa.mcp_remote.store import (
    FileServers,
    RowMemory,
    RowServers,
    Saved,
    Sealer,
    ServerEntry,
    ServerStorage,
    ServerStore,
)
from servers.machine_oauth import machine_oauth_server
from support.postgres import database_url, postgres
from support.remote import AddedServer, OwnerChat, demo_server, remote_host

__all__ = ["database_url", "postgres"]

pytestmark = pytest.mark.anyio

TEST_TIMEOUT = 60.0
SCOPE = "console:t"

Rewrite = Callable[..., Awaitable[Saved | None]]


@pytest.fixture(params=["files", "postgres"])
async def storage(request: pytest.FixtureRequest) -> AsyncIterator[Storage | None]:
    """Where the host keeps the chats' servers: the data dir's sealed files, or PostgreSQL."""
    if request.param == "files":
        yield None
        return
    url = request.getfixturevalue("database_url")
    async with await Database.open(DatabaseUrl.parse(url)) as database:
        await upgrade(database)
        yield DatabaseStorage(database)


@asynccontextmanager
async def owner(data_dir: Path, host_secret: HostSecret, storage: Storage | None) -> AsyncIterator[OwnerChat]:
    async with remote_host(data_dir, host_secret, storage=storage) as host:
        yield OwnerChat(host, SCOPE)


class HeldWrite:
    """The store's ``rewrite`` for one chat, holding the first write of an entry ``which`` picks
    until the test lets it go: the seam where a server's write of its entry is in flight."""

    def __init__(self, real: Rewrite, which: Callable[[ServerEntry], bool]) -> None:
        self._real, self._which = real, which
        self.arrived, self.go = anyio.Event(), anyio.Event()
        self.outcome: list[Saved | None] = []

    async def __call__(self, entry: ServerEntry, *, built_from: ServerEntry) -> Saved | None:
        held = self._which(entry) and not self.arrived.is_set()
        if held:
            self.arrived.set()
            with anyio.fail_after(TEST_TIMEOUT):
                await self.go.wait()
        saved = await self._real(entry, built_from=built_from)
        if held:
            self.outcome.append(saved)
        return saved


@asynccontextmanager
async def held_write(chat: OwnerChat, which: Callable[[ServerEntry], bool]) -> AsyncIterator[HeldWrite]:
    session = await chat.session()
    store = (await chat.extension.owner_servers(session)).store
    assert store is not None
    held = HeldWrite(store.rewrite, which)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "rewrite", held)
        yield held


async def stored(chat: OwnerChat, host_secret: HostSecret) -> tuple[ServerEntry, ...]:
    """The chat's servers as another process reads them, from the sealed file or the rows."""
    session = await chat.session()
    sealer = Sealer(host_secret.value)
    store: ServerStorage
    if session.storage is not None:
        store = RowServers(session.storage.servers, SCOPE, sealer, RowMemory())
    else:
        store = FileServers(ServerStore(session.workspace, SCOPE, sealer, state_dir=session.state_dir))
    result = await store.load()
    assert result.warning is None and result.rejected == ()
    return result.entries


def key() -> str:
    return "key-" + uuid.uuid4().hex


def has_key(entry: ServerEntry, key: str) -> bool:
    return entry.headers.get("Authorization") == f"Bearer {key}"


async def test_a_replacement_with_a_new_key_stays_while_the_old_servers_pins_were_in_flight(
    data_dir: Path, host_secret: HostSecret, storage: Storage | None
) -> None:
    old_key, new_key = key(), key()
    async with demo_server(old_key) as old, demo_server(new_key) as new:
        with anyio.fail_after(TEST_TIMEOUT):
            async with owner(data_dir, host_secret, storage) as chat:
                held_pins = held_write(chat, lambda entry: has_key(entry, old_key))
                async with held_pins as held, anyio.create_task_group() as tg:
                    first: list[str] = []

                    async def add_old() -> None:
                        first.append(await chat.command(f"/mcp_add docs {old.url} --bearer {old_key}"))

                    tg.start_soon(add_old)
                    await held.arrived.wait()  # its connect adopted the tools; the pins' write waits
                    replaced = await chat.command(f"/mcp_add docs {new.url} --bearer {new_key}")
                    held.go.set()
                assert held.outcome == [None]  # the old server's write was dropped by the store
                assert replaced.startswith("Replaced docs: connected"), replaced

                (docs,) = await stored(chat, host_secret)
                assert docs.url == new.url and dict(docs.headers) == {"Authorization": f"Bearer {new_key}"}
                servers = await chat.extension.owner_servers(await chat.session())
                assert servers.servers["docs"].entry == docs


async def test_a_removed_server_does_not_come_back_with_its_pins_in_flight(
    data_dir: Path, host_secret: HostSecret, storage: Storage | None
) -> None:
    old_key = key()
    async with demo_server(old_key) as old:
        with anyio.fail_after(TEST_TIMEOUT):
            async with owner(data_dir, host_secret, storage) as chat:
                held_pins = held_write(chat, lambda entry: has_key(entry, old_key))
                async with held_pins as held, anyio.create_task_group() as tg:
                    tg.start_soon(chat.command, f"/mcp_add docs {old.url} --bearer {old_key}")
                    await held.arrived.wait()
                    removed = await chat.command("/mcp_remove docs")
                    held.go.set()
                assert removed.startswith("Removed docs"), removed
                assert held.outcome == [None]
                assert await stored(chat, host_secret) == ()
                listed = await chat.command("/mcp_list")
                assert "docs" not in listed, listed


async def test_a_policy_set_on_a_server_replaced_meanwhile_changes_nothing_and_says_so(
    chat: OwnerChat, host_secret: HostSecret
) -> None:
    old_key, new_key = key(), key()
    async with demo_server(old_key) as old, demo_server(new_key) as new:
        with anyio.fail_after(TEST_TIMEOUT):
            await chat.command(f"/mcp_add docs {old.url} --bearer {old_key}")
            held_policy = held_write(
                chat, lambda entry: has_key(entry, old_key) and entry.policy.of("echo", "allow") == "deny"
            )
            async with held_policy as held, anyio.create_task_group() as tg:
                answer: list[str] = []

                async def deny() -> None:
                    answer.append(await chat.command("/mcp_policy docs echo deny"))

                tg.start_soon(deny)
                await held.arrived.wait()
                await chat.command(f"/mcp_add docs {new.url} --bearer {new_key}")
                held.go.set()
            assert answer == ["Nothing was changed: docs was replaced or removed meanwhile"]
            (docs,) = await stored(chat, host_secret)
            assert has_key(docs, new_key) and docs.policy.of("echo", "allow") == "allow"
            servers = await chat.extension.owner_servers(await chat.session())
            assert "docs__echo" in servers.servers["docs"].tools


async def test_a_machine_clients_new_secret_stays_while_the_old_ones_tokens_were_in_flight(
    data_dir: Path, host_secret: HostSecret, storage: Storage | None
) -> None:
    old_secret, new_secret = "cs-" + uuid.uuid4().hex, "cs-" + uuid.uuid4().hex

    def old_tokens(entry: ServerEntry) -> bool:
        grant = entry.oauth
        return (
            grant is not None
            and grant.tokens is not None
            and grant.client is not None
            and grant.client.client_secret == old_secret
        )

    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            machine_oauth_server(client_id="svc", secret=old_secret) as server,
            owner(data_dir, host_secret, storage) as chat,
        ):
            add = "/mcp_add bot {} --client-id svc --client-secret {} --grant client-credentials"
            async with held_write(chat, old_tokens) as held, anyio.create_task_group() as tg:
                tg.start_soon(chat.command, add.format(server.url, old_secret))
                await held.arrived.wait()  # the old client got its tokens; their write waits
                await chat.command(add.format(server.url, new_secret))
                held.go.set()
            assert held.outcome == [None]
            (bot,) = await stored(chat, host_secret)
            assert bot.oauth is not None and bot.oauth.client is not None
            assert bot.oauth.client.client_secret == new_secret and bot.oauth.tokens is None
            assert all(old_secret not in value for value in bot.secrets)


async def test_a_servers_own_writes_at_once_both_land(
    demo_added: AddedServer, host_secret: HostSecret
) -> None:
    chat = demo_added.chat
    with anyio.fail_after(TEST_TIMEOUT):
        server = (await chat.extension.owner_servers(await chat.session())).servers["demo"]
        pins = server.entry.pins
        assert pins is not None
        rejected = replace(pins, tools={tool: pin for tool, pin in pins.tools.items() if tool != "fail"})
        answer: list[str] = []

        async def deny() -> None:
            answer.append(await chat.command("/mcp_policy demo echo deny"))

        held_pins = held_write(chat, lambda entry: entry.pins == rejected)
        async with held_pins as held, anyio.create_task_group() as tg:
            tg.start_soon(server.save_pins, rejected)  # an owner's decision, its write in flight
            await held.arrived.wait()
            tg.start_soon(deny)
            # The policy's write waits for the pins' one; it would otherwise land first, and the
            # pins' write after it would seal the entry without the policy.
            await anyio.wait_all_tasks_blocked()
            held.go.set()
        assert answer and answer[0].startswith("Policy of echo of demo: deny"), answer
        (demo,) = await stored(chat, host_secret)
        assert demo.pins == rejected and demo.policy.of("echo", "allow") == "deny"
