"""A chat's audit log in PostgreSQL: the same chained, MACed records as the file, written with
their head in one transaction over the head the writer read.

Two hosts on one database (two pools, as two processes) write one chat's log as the chat moves
between them, also while both think they hold it; every tamper a database writer can make (a row
changed, deleted, renumbered, copied from another chat, the head put back) is found by the
verifier, with its reason; a writer that sees the head go back under it says so in the chain.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from playa.db import Database, DatabaseStorage, DatabaseUrl, upgrade
from playa.mcp_remote import AuditKey, RemoteMcpExtension
from playa.mcp_remote.store import AuditLog, FieldValue, HostSecret, Verification, move_rows, verify_rows
from support.audit import SECRET
from support.host import new_host

pytestmark = pytest.mark.anyio

SCOPE = "telegram:42"
OTHER = "telegram:43"
KEY = AuditKey(SECRET.encode())


@pytest.fixture
async def storages(database_url: str) -> AsyncIterator[tuple[DatabaseStorage, DatabaseStorage]]:
    """Two storages over one database, each with its own pool: two processes' views of it."""
    url = DatabaseUrl.parse(database_url)
    async with await Database.open(url) as first, await Database.open(url) as second:
        await upgrade(first)
        yield DatabaseStorage(first), DatabaseStorage(second)


async def write(storage: DatabaseStorage, scope: str, tools: list[str]) -> None:
    """Records of tool calls written as a chat writes them, over the database's rows."""
    async with anyio.create_task_group() as tg:
        log = AuditLog(None, scope, KEY, task_group=tg, rows=storage.audit)
        for tool in tools:
            log.record("tool_call", server="docs", tool=tool, outcome="ok")
        await log.flush()


async def execute(storage: DatabaseStorage, sql: str, *args: object) -> None:
    async with storage.database.connection() as connection:
        await connection.execute(sql, *args)


def tools_of(found: Verification) -> list[FieldValue]:
    return [record.fields.get("tool") for record in found.records]


async def test_a_chat_moving_between_two_hosts_keeps_one_log_that_verifies_whole(
    storages: tuple[DatabaseStorage, DatabaseStorage], tmp_path: Path
) -> None:
    first, second = storages
    secret = HostSecret(SECRET.encode(), "MCP_ENCRYPTION_SECRET")
    one, two = RemoteMcpExtension(secret), RemoteMcpExtension(secret)
    async with (
        new_host(tmp_path / "a", None, [one], storage=first) as host_a,
        new_host(tmp_path / "b", None, [two], storage=second) as host_b,
    ):
        chat_a = one.chat(await host_a.session(SCOPE, owner="1"))
        chat_b = two.chat(await host_b.session(SCOPE, owner="1"))
        for turn in range(3):
            # The chat moves to the other host, and back: each host knows the head it wrote last.
            for name, chat in (("a", chat_a), ("b", chat_b)):
                chat.audit.record("tool_call", server="docs", tool=f"{name}{turn}", outcome="ok")
                await chat.audit.flush()
        # Both think they hold the chat, and write at once: neither chain is lost or interleaved.
        for n in range(10):
            chat_a.audit.record("tool_call", server="docs", tool=f"both-a{n}", outcome="ok")
            chat_b.audit.record("tool_call", server="docs", tool=f"both-b{n}", outcome="ok")
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(chat_a.audit.flush)
                tg.start_soon(chat_b.audit.flush)
        shown = await chat_b.audit_records(4)
    found = await verify_rows(first.audit, SCOPE, KEY)
    assert found.ok, found.breaks
    tools = tools_of(found)
    assert tools[:6] == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert sorted(map(str, tools[6:])) == sorted(
        [f"both-a{n}" for n in range(10)] + [f"both-b{n}" for n in range(10)]
    )
    assert [r.seq for r in found.records] == list(range(1, 27))
    # /mcp_audit reads the rows: the latest records, each verifying.
    assert shown is not None and [(r.seq, ok) for r, ok in shown] == [(n, True) for n in range(23, 27)]
    # Nothing of the log went to either data dir.
    assert not await anyio.to_thread.run_sync(lambda: list(tmp_path.rglob("audit*")))


async def test_a_row_in_clear_holds_names_and_outcomes_never_a_secret_and_verifies_as_the_file(
    storages: tuple[DatabaseStorage, DatabaseStorage],
) -> None:
    first, _ = storages
    await write(first, SCOPE, ["search", "fetch"])
    head, rows = await first.audit.read(SCOPE)
    assert head is not None and [seq for seq, _ in rows] == [1, 2]
    assert b'"tool":"search"' in rows[0][1] and SECRET.encode() not in head + b"".join(r for _, r in rows)
    # An append is all or nothing: over another head, or onto a number taken, it writes nothing.
    assert not await first.audit.append(SCOPE, b"not the head", [(3, b"x")], b"new head")
    assert not await first.audit.append(SCOPE, None, [(3, b"x")], b"new head")
    assert not await first.audit.append(SCOPE, head, [(2, b"x"), (3, b"y")], b"new head")
    assert await first.audit.read(SCOPE) == (head, rows)
    # Another key (another host secret) verifies nothing.
    other = await verify_rows(first.audit, SCOPE, AuditKey(b"y" * 32))
    assert not other.ok and "another key" in str(other.breaks[-1])


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (
            "UPDATE audit_records SET record = convert_to(replace(convert_from(record, 'UTF8'), '\"ok\"', "
            "'\"no\"'), 'UTF8') WHERE chat = $1 AND seq = 2",
            "row 2: record 2 does not verify (edited, forged, or from another chat)",
        ),
        (
            "DELETE FROM audit_records WHERE chat = $1 AND seq = 2",
            "row 3: record 2 is missing before record 3 (deleted or reordered)",
        ),
        (
            "DELETE FROM audit_records WHERE chat = $1 AND seq = 4",
            "the log ends at record 3 but its head record says 4 were written (its tail was cut)",
        ),
        (
            "UPDATE audit_records SET seq = 9 WHERE chat = $1 AND seq = 4",
            "row 9: the row holds record 4 (renumbered)",
        ),
        (
            "UPDATE audit_records SET record = (SELECT record FROM audit_records WHERE chat = 'telegram:43' AND seq = 3) "
            "WHERE chat = $1 AND seq = 3",
            "row 3: record 3 does not verify (edited, forged, or from another chat)",
        ),
        (
            "UPDATE audit_heads SET head = (SELECT head FROM audit_heads WHERE chat = 'telegram:43') WHERE chat = $1",
            "the head record does not verify (edited, or copied from another chat)",
        ),
        ("DELETE FROM audit_heads WHERE chat = $1", "the head record is missing"),
    ],
)
async def test_a_row_changed_deleted_renumbered_or_copied_fails_verification_with_its_reason(
    storages: tuple[DatabaseStorage, DatabaseStorage], tamper: str, reason: str
) -> None:
    first, _ = storages
    await write(first, SCOPE, ["t1", "t2", "t3", "t4"])
    await write(first, OTHER, ["o1", "o2", "o3", "o4"])
    assert (await verify_rows(first.audit, SCOPE, KEY)).ok
    await execute(first, tamper, SCOPE)
    found = await verify_rows(first.audit, SCOPE, KEY)
    assert reason in [str(b) for b in found.breaks], found.breaks


async def test_a_head_put_back_is_found_by_the_verifier_and_by_the_writer_holding_the_chat(
    storages: tuple[DatabaseStorage, DatabaseStorage],
) -> None:
    first, second = storages
    await write(first, SCOPE, ["t1", "t2", "t3"])
    old_head, _ = await first.audit.read(SCOPE)
    async with anyio.create_task_group() as tg:
        log = AuditLog(None, SCOPE, KEY, task_group=tg, rows=second.audit)
        for tool in ("t4", "t5", "t6"):
            log.record("tool_call", server="docs", tool=tool, outcome="ok")
        await log.flush()

        # The head alone put back: the log goes on past it, which one transaction never leaves.
        await execute(first, "UPDATE audit_heads SET head = $2 WHERE chat = $1", SCOPE, old_head)
        found = await verify_rows(first.audit, SCOPE, KEY)
        assert [str(b) for b in found.breaks] == [
            "the log goes on to record 6 but its head record names record 3 (the head was put back to an earlier one)"
        ]

        # Head and rows put back together (a backup): they verify, but the writer that wrote
        # record 6 knows better, and says so in the chain before its next record.
        await execute(first, "DELETE FROM audit_records WHERE chat = $1 AND seq > 3", SCOPE)
        assert (await verify_rows(first.audit, SCOPE, KEY)).ok
        log.record("tool_call", server="docs", tool="t7", outcome="ok")
        await log.flush()
    found = await verify_rows(first.audit, SCOPE, KEY)
    assert found.ok, found.breaks
    assert [(r.seq, r.kind) for r in found.records[3:]] == [(4, "audit_head_lost"), (5, "tool_call")]
    assert found.records[3].fields["why"] == "the head went back from record 6 to 3"
    assert found.records[4].fields["tool"] == "t7"


async def test_a_moved_chat_takes_its_log_along_and_goes_on_under_its_new_scope(
    storages: tuple[DatabaseStorage, DatabaseStorage], tmp_path: Path
) -> None:
    first, _ = storages
    await write(first, SCOPE, ["t1", "t2"])
    host = new_host(
        tmp_path,
        None,
        [RemoteMcpExtension(HostSecret(SECRET.encode(), "MCP_ENCRYPTION_SECRET"))],
        storage=first,
    )
    async with host:
        await host.session(SCOPE, owner="1")
        assert await host.move_scope(SCOPE, OTHER, owner="1") == "moved"
    assert await first.audit.read(SCOPE) == (None, [])
    found = await verify_rows(first.audit, OTHER, KEY)
    assert found.ok, found.breaks
    assert [(r.kind, r.fields.get("from")) for r in found.records][-1] == ("chat_moved", SCOPE)
    assert tools_of(found)[:2] == ["t1", "t2"]


async def test_a_lost_head_is_said_in_the_chain_and_a_move_onto_another_log_moves_nothing(
    storages: tuple[DatabaseStorage, DatabaseStorage],
) -> None:
    first, _ = storages
    await write(first, SCOPE, ["t1", "t2"])
    await execute(first, "DELETE FROM audit_heads WHERE chat = $1", SCOPE)
    await write(first, SCOPE, ["t3"])  # a new writer: its chain goes on after the last row, saying why
    found = await verify_rows(first.audit, SCOPE, KEY)
    assert found.ok, found.breaks
    assert [(r.seq, r.kind, r.fields.get("why")) for r in found.records[2:]] == [
        (3, "audit_head_lost", "missing"),
        (4, "tool_call", None),
    ]

    await write(first, OTHER, ["o1"])
    assert not await move_rows(first.audit, SCOPE, OTHER, KEY)
    assert [r.seq for r in (await verify_rows(first.audit, SCOPE, KEY)).records] == [1, 2, 3, 4]
    assert tools_of(await verify_rows(first.audit, OTHER, KEY)) == ["o1"]
