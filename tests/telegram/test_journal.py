"""The bot's sealed records, in a data dir's folder and in a database's rows: one contract.

What the inbox and outbox rely on, whichever backend keeps them: a new name is kept once,
records come back by name (per chat, with a database), a done record is gone, a record that
does not open is put aside and the rest still load, and nothing is in clear.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from playa.db import Database, DatabaseStorage, DatabaseUrl, upgrade
from playa.telegram import Journal
from support.postgres import database_url, postgres

__all__ = ["database_url", "postgres"]

pytestmark = pytest.mark.anyio

TOKEN = "123456789:AAHfakeTokenForJournals0123456789abcde"
KEY = "sk-journal-0123456789abcdefghijklmnop"


@pytest.fixture(params=["folder", "rows"])
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Journal, object]]:
    """An inbox journal, and what lets a test read its raw bytes (the folder, or the database)."""
    if request.param == "folder":
        yield Journal.for_bot(tmp_path, TOKEN, "inbox"), tmp_path
        return
    url = request.getfixturevalue("database_url")
    async with await Database.open(DatabaseUrl.parse(url)) as database:
        await upgrade(database)
        yield Journal.in_rows(DatabaseStorage(database).inbox, TOKEN, "inbox"), database


async def raw_bytes(where: object) -> bytes:
    if isinstance(where, Path):
        return b"".join(path.read_bytes() for path in sorted(where.rglob("*")) if path.is_file())
    assert isinstance(where, Database)
    async with where.connection() as connection:
        rows = await connection.fetch("SELECT name, chat, sealed FROM telegram_inbox")
    return b"".join(row["name"].encode() + row["chat"].encode() + row["sealed"] for row in rows)


async def test_records_are_kept_once_by_name_sealed_and_gone_when_done(
    journal: tuple[Journal, object],
) -> None:
    records, where = journal
    assert await records.add("00000000000000000002", 7, {"update": {"text": f"/mcp_add a --bearer {KEY}"}})
    assert await records.add("00000000000000000001", 7, {"update": {"text": "first"}})
    assert not await records.add("00000000000000000001", 7, {"update": {"text": "again"}})  # known
    await records.put("00000000000000000002", 7, {"started": True, "chat_id": 7})

    assert await records.load() == [
        ("00000000000000000001", {"update": {"text": "first"}}),
        ("00000000000000000002", {"started": True, "chat_id": 7}),
    ]
    await records.put("00000000000000000003", 7, {"update": {"text": KEY}})
    assert KEY.encode() not in await raw_bytes(where)  # sealed, wherever it is kept

    await records.delete("00000000000000000001")
    assert [name for name, _ in await records.load()] == ["00000000000000000002", "00000000000000000003"]


async def test_a_record_that_does_not_open_is_put_aside_and_the_rest_load(
    journal: tuple[Journal, object], tmp_path: Path
) -> None:
    records, where = journal
    await records.put("00000000000000000001", 7, {"update": {"text": "kept"}})
    await records.put("00000000000000000002", 7, {"update": {"text": "spoilt"}})
    # Another token's records (another bot's key) do not open with this one.
    other = Journal.for_bot(tmp_path / "other", "987654321:AnotherBotsTokenForJournals01234567", "inbox")
    if isinstance(where, Path):
        spoilt = next(where.rglob("00000000000000000002.rec"))
        spoilt.write_bytes(spoilt.read_bytes()[:-1] + bytes([spoilt.read_bytes()[-1] ^ 1]))
    else:
        assert isinstance(where, Database)
        async with where.connection() as connection:
            await connection.execute(
                "UPDATE telegram_inbox SET sealed = set_byte(sealed, 20, get_byte(sealed, 20) # 1) "
                "WHERE name = '00000000000000000002'"
            )
    assert await records.load() == [("00000000000000000001", {"update": {"text": "kept"}})]
    assert await records.load() == [("00000000000000000001", {"update": {"text": "kept"}})]  # put aside once
    assert await other.load() == []


async def test_with_a_database_a_chats_records_load_alone(database_url: str) -> None:
    async with await Database.open(DatabaseUrl.parse(database_url)) as database:
        await upgrade(database)
        records = Journal.in_rows(DatabaseStorage(database).outbox, TOKEN, "outbox")
        await records.put("a", 1, {"n": 1})
        await records.put("b", 2, {"n": 2})
        await records.put("c", 1, {"n": 3})
        assert await records.load(1) == [("a", {"n": 1}), ("c", {"n": 3})]
        assert await records.load(2) == [("b", {"n": 2})]
        # Another bot's journal on the same rows sees none of them.
        assert (
            await Journal.in_rows(DatabaseStorage(database).outbox, "5:x" + TOKEN[3:], "outbox").load() == []
        )
