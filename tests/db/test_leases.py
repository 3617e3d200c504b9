"""Chat leases, shared records and the poller's leadership in PostgreSQL: what several processes
of one bot rely on, against a real server.

Two ``DatabaseStorage`` over two pools stand for two processes; a lease's expiry is made to
pass by taking it for a fraction of a second, never by sleeping past a guess.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from playa.db import ChatLeaseTable, Database, DatabaseStorage, DatabaseUrl, upgrade

pytestmark = pytest.mark.anyio

BOT = "123"
WAIT = 30.0
"""Bounds a wait for a notification on a busy machine."""


@pytest.fixture
async def database(database: Database) -> Database:
    """The test's database, at the latest schema."""
    await upgrade(database)
    return database


@pytest.fixture
async def second(database: Database, database_url: str) -> AsyncIterator[DatabaseStorage]:
    """Another process's storage on the same database (its own pool)."""
    other = await Database.open(DatabaseUrl.parse(database_url))
    try:
        yield DatabaseStorage(other)
    finally:
        await other.aclose()


async def test_a_chat_has_one_holder_until_its_lease_expires(
    database: Database, second: DatabaseStorage
) -> None:
    first = DatabaseStorage(database).leases
    assert await first.take(BOT, "7", "a", 60) == "new"
    assert await second.leases.take(BOT, "7", "b", 60) is None  # a's lease is valid
    assert await first.take(BOT, "7", "a", 60) == "held"
    assert await second.leases.take(BOT, "8", "b", 60) == "new"  # another chat: free
    assert await second.leases.take("999", "7", "b", 60) == "new"  # another bot's chat 7

    assert await first.take(BOT, "7", "a", 0.2) == "held"  # a stops renewing...
    taken = None
    with anyio.fail_after(WAIT):
        for _ in range(int(WAIT / 0.05)):  # the database's clock passes the 0.2 s
            if (taken := await second.leases.take(BOT, "7", "b", 60)) is not None:
                break
            await anyio.sleep(0.05)
    assert taken == "moved"  # ...and b takes the chat over
    assert await first.renew(BOT, "a", 60) == set()  # a learns it lost the chat
    assert await second.leases.renew(BOT, "b", 60) == {"7", "8"}


async def test_two_processes_racing_for_a_free_chat_never_both_win(
    database: Database, second: DatabaseStorage
) -> None:
    first = DatabaseStorage(database).leases

    async def race(leases: ChatLeaseTable, holder: str, chat: str, won: list[str]) -> None:
        if await leases.take(BOT, chat, holder, 60) is not None:
            won.append(holder)

    for chat in map(str, range(20)):
        won: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(race, first, "a", chat, won)
            tg.start_soon(race, second.leases, "b", chat, won)
        assert len(won) == 1, (chat, won)


async def test_released_chats_are_free_at_once_and_orphans_are_chats_waiting_without_a_live_holder(
    database: Database, second: DatabaseStorage
) -> None:
    storage = DatabaseStorage(database)
    leases = storage.leases
    assert await storage.inbox.add(BOT, "00000000000000000001", "1", b"sealed-1")
    assert await storage.inbox.add(BOT, "00000000000000000002", "2", b"sealed-2")
    await storage.outbox.put(BOT, "r1", "3", b"reply")
    # Nobody holds 1, 2 or 3: all are orphans, for anyone.
    assert await leases.orphans(BOT, "b", 100) == ["1", "2", "3"]
    assert await leases.take(BOT, "1", "a", 60) == "new"
    assert await leases.orphans(BOT, "b", 100) == ["2", "3"]  # a holds 1
    assert await leases.orphans(BOT, "a", 100) == ["1", "2", "3"]  # its own are not hidden from a
    await leases.release(BOT, "a", ["1"])
    assert await second.leases.take(BOT, "1", "b", 60) == "new"
    await storage.inbox.done(BOT, "00000000000000000002")
    await storage.outbox.done(BOT, "r1")
    assert await leases.orphans(BOT, "c", 100) == []  # 1 is b's; 2 and 3 have nothing waiting
    await second.leases.release(BOT, "b")
    assert await second.leases.renew(BOT, "b", 60) == set()


async def test_an_update_received_again_is_the_same_record_even_after_it_was_handled(
    database: Database,
) -> None:
    inbox = DatabaseStorage(database).inbox
    assert await inbox.add(BOT, "00000000000000000005", "9", b"first")
    assert not await inbox.add(BOT, "00000000000000000005", "9", b"again")  # redelivered
    await inbox.put(BOT, "00000000000000000005", "9", b"started")
    assert await inbox.load(BOT, "9") == [("00000000000000000005", b"started")]
    await inbox.done(BOT, "00000000000000000005")
    assert await inbox.load(BOT, "9") == []
    assert not await inbox.add(BOT, "00000000000000000005", "9", b"late")  # known a day
    async with database.connection() as connection:
        kept = await connection.fetchval(
            "SELECT sealed FROM telegram_inbox WHERE name = $1", "00000000000000000005"
        )
    assert kept == b""  # the name stays, the record's bytes go
    assert await DatabaseStorage(database).leases.prune(BOT, 0.0) == 1
    assert await inbox.add(BOT, "00000000000000000005", "9", b"after a day")


async def test_records_load_in_name_order_per_chat_and_an_outbox_record_goes_when_done(
    database: Database,
) -> None:
    outbox = DatabaseStorage(database).outbox
    for name in ("b", "a", "c"):
        await outbox.put(BOT, name, "1", name.encode())
    await outbox.put(BOT, "d", "2", b"d")
    await outbox.put("other-bot", "e", "1", b"e")
    assert [name for name, _ in await outbox.load(BOT, "1")] == ["a", "b", "c"]
    assert [name for name, _ in await outbox.load(BOT)] == ["a", "b", "c", "d"]
    await outbox.done(BOT, "b")
    assert [name for name, _ in await outbox.load(BOT, "1")] == ["a", "c"]
    async with database.connection() as connection:
        assert await connection.fetchval("SELECT count(*) FROM telegram_outbox WHERE name = 'b'") == 0


async def test_a_record_added_by_one_process_wakes_the_listeners_of_its_bot_only(
    database: Database, second: DatabaseStorage
) -> None:
    woken: list[str] = []
    arrived = anyio.Event()

    def wake(chat: str) -> None:
        woken.append(chat)
        arrived.set()

    async with DatabaseStorage(database).leases.listen(BOT, wake):
        assert await second.inbox.add("another-bot", "00000000000000000001", "5", b"x")
        assert await second.inbox.add(BOT, "00000000000000000001", "6", b"x")
        with anyio.fail_after(WAIT):
            await arrived.wait()
    assert woken == ["6"]


async def test_one_process_leads_and_another_takes_over_when_its_connection_ends(
    database: Database, second: DatabaseStorage
) -> None:
    first = DatabaseStorage(database).leases
    async with first.leader(BOT, "poller") as lead:
        assert lead.held
        assert await lead.check()
        async with second.leases.leader(BOT, "poller") as other:
            assert not other.held
            assert not await other.check()
        async with second.leases.leader(BOT, "something else") as unrelated:
            assert unrelated.held
        async with second.leases.leader("another-bot", "poller") as another_bot:
            assert another_bot.held
    # The first leader's connection is closed: the lock went with it.
    async with second.leases.leader(BOT, "poller") as taken:
        assert taken.held


async def test_a_listener_whose_connection_is_lost_is_told(database: Database) -> None:
    async with DatabaseStorage(database).leases.listen(BOT, lambda chat: None) as lost:
        assert not lost.is_set()
        async with database.connection() as connection:
            ended = await connection.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%' AND datname = current_database() AND pid <> pg_backend_pid()"
            )
        assert ended == 1
        with anyio.fail_after(WAIT):
            await lost.wait()


async def test_a_leases_remaining_time_is_the_databases(database: Database) -> None:
    leases = DatabaseStorage(database).leases
    assert await leases.remaining(BOT, "1") is None  # nobody's
    await leases.take(BOT, "1", "a", 60)
    left = await leases.remaining(BOT, "1")
    assert left is not None and 50 < left <= 60
    await leases.take(BOT, "1", "a", 0)
    left = await leases.remaining(BOT, "1")
    assert left is not None and left <= 0
