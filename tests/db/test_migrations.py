"""The schema: applied on an empty database, a no-op the second time, one upgrade at a time."""

from __future__ import annotations

import anyio
import pytest

from playa.db import (
    LOCK_KEY,
    Database,
    DatabaseUrl,
    latest_version,
    migrations,
    schema_version,
    upgrade,
)
from playa.exceptions import DatabaseError

pytestmark = pytest.mark.anyio

WAIT = 60.0
"""The bound on waits for a healthy local server on a busy machine."""

TABLES = {
    "schema_version",
    "host_keys",
    "server_stores",
    "servers",
    "oauth_grants",
    "oauth_pending",
    "tool_pins",
    "pending_approvals",
    "history",
    "workspace_files",
    "workspace_usage",
    "telegram_inbox",
    "telegram_outbox",
    "audit_records",
    "audit_heads",
    "chat_leases",
    "oauth_redirects",
}


async def tables(database: Database) -> set[str]:
    async with database.connection() as connection:
        rows = await connection.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {row["tablename"] for row in rows}


def test_the_migrations_are_numbered_from_one_without_gaps() -> None:
    found = migrations()
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert latest_version() == len(found) >= 1
    assert found[0].name == "state"


async def test_an_empty_database_is_brought_to_the_latest_version(database: Database) -> None:
    assert await schema_version(database) == 0
    done = await upgrade(database)
    assert (done.before, done.after) == (0, latest_version())
    assert [m.version for m in done.applied] == list(range(1, latest_version() + 1))
    assert await schema_version(database) == latest_version()
    assert await tables(database) == TABLES
    async with database.connection() as connection:
        rows = await connection.fetch("SELECT version, name FROM schema_version ORDER BY version")
    assert [(r["version"], r["name"]) for r in rows] == [(m.version, m.name) for m in migrations()]


async def test_a_second_upgrade_changes_nothing(database: Database) -> None:
    await upgrade(database)
    again = await upgrade(database)
    assert (again.before, again.after, again.applied) == (latest_version(), latest_version(), ())
    async with database.connection() as connection:
        assert await connection.fetchval("SELECT count(*) FROM schema_version") == latest_version()


async def test_two_upgrades_at_once_apply_the_schema_once(database_url: str, database: Database) -> None:
    url = DatabaseUrl.parse(database_url)
    results = []
    # Both upgrades are made to wait on the lock together, so they truly overlap.
    async with database.connection() as holder:
        await holder.execute("SELECT pg_advisory_lock($1)", LOCK_KEY)
        async with await Database.open(url) as first, await Database.open(url) as second:

            async def run(db: Database) -> None:
                results.append(await upgrade(db))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, first)
                tg.start_soon(run, second)
                # The server signals no event when a session starts waiting on a lock: polled.
                with anyio.fail_after(WAIT):
                    while True:
                        waiting = await holder.fetchval(
                            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                        )
                        if waiting == 2:
                            break
                        await anyio.sleep(0.02)
                await holder.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
    assert sorted(len(r.applied) for r in results) == [0, latest_version()]
    assert await schema_version(database) == latest_version()


async def test_a_database_newer_than_this_playa_is_refused(database: Database) -> None:
    await upgrade(database)
    async with database.connection() as connection:
        await connection.execute(
            "INSERT INTO schema_version (version, name) VALUES ($1, 'from_the_future')", latest_version() + 1
        )
    for attempt in (upgrade, schema_version):
        with pytest.raises(DatabaseError, match="newer than this Playa"):
            await attempt(database)


async def test_a_failed_migration_leaves_the_database_as_it_was(database: Database) -> None:
    # A table the first migration makes already exists: that migration fails, and nothing stays.
    async with database.connection() as connection:
        await connection.execute("CREATE TABLE audit_heads (chat text)")
    with pytest.raises(DatabaseError, match="42P07"):
        await upgrade(database)
    assert await tables(database) == {"audit_heads"}


async def test_the_workspace_usage_follows_every_write(database: Database) -> None:
    await upgrade(database)
    async with database.transaction() as connection:
        insert = "INSERT INTO workspace_files (chat, path, content) VALUES ($1, $2, $3)"
        await connection.execute(insert, "telegram:1", "notes.md", b"x" * 100)
        await connection.execute(insert, "telegram:1", "data/a.csv", b"y" * 50)
        await connection.execute(insert, "telegram:2", "notes.md", b"z" * 7)
        await connection.execute(
            "UPDATE workspace_files SET content = $1 WHERE chat = 'telegram:1' AND path = 'notes.md'",
            b"x" * 10,
        )
        await connection.execute(
            "DELETE FROM workspace_files WHERE chat = 'telegram:1' AND path = 'data/a.csv'"
        )
    async with database.connection() as connection:
        rows = await connection.fetch("SELECT chat, bytes, files FROM workspace_usage ORDER BY chat")
    assert [tuple(r) for r in rows] == [("telegram:1", 10, 1), ("telegram:2", 7, 1)]
