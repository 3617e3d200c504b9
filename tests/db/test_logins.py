"""Pending OAuth logins in PostgreSQL: found by the state's hash, taken once, gone when expired."""

from __future__ import annotations

import hashlib
import time

import anyio
import pytest

from playa.db import Database, DatabaseStorage, upgrade

pytestmark = pytest.mark.anyio

STATE = "state-9c1f0e6a4b7d4e2f8a3b5c6d7e8f9a0b"
HASH = hashlib.sha256(STATE.encode()).digest()


async def test_of_two_processes_taking_one_login_exactly_one_gets_it(database: Database) -> None:
    await upgrade(database)
    logins = DatabaseStorage(database).logins
    await logins.put(HASH, "telegram:123", "docs", b"sealed", time.time() + 600)
    taken: list[tuple[str, str, bytes] | None] = []

    async def take() -> None:
        taken.append(await logins.take(HASH, time.time()))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(take)
    assert sorted(taken, key=lambda t: t is None) == [("telegram:123", "docs", b"sealed"), None]
    async with database.connection() as c:
        stored = await c.fetch("SELECT state_hash FROM oauth_pending")
        assert stored == []
        text = await c.fetchval("SELECT string_agg(t::text, ' ') FROM oauth_pending t")
    assert text is None or STATE not in text  # the state itself is never stored


async def test_an_expired_login_is_not_taken_and_is_cleared(database: Database) -> None:
    await upgrade(database)
    logins = DatabaseStorage(database).logins
    other = hashlib.sha256(b"another state of a login").digest()
    await logins.put(HASH, "telegram:123", "docs", b"sealed", time.time() + 60)
    await logins.put(other, "telegram:123", "wiki", b"sealed", time.time() + 60)
    assert await logins.take(HASH, time.time() + 120) is None
    async with database.connection() as c:
        assert await c.fetchval("SELECT count(*) FROM oauth_pending") == 0
    assert await logins.take(other, time.time()) is None
