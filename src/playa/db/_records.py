"""A front end's inbox and outbox as rows (the core's ``RecordRows``): sealed bytes by name.

The bytes arrive sealed by the front end (``telegram/_journal.py``); only the bot, the chat and
the record's name are in clear. An inbox row that is done keeps its name (its bytes emptied)
until ``ChatLeaseTable.prune``: the same update received again is then known, not handled twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from ._pool import Database

__all__ = ["CHANNEL", "RecordTable"]

CHANNEL: Final = "playa_records"
"""The NOTIFY channel a new record is announced on: the payload is ``<bot> <chat>``."""


@dataclass(frozen=True)
class _Queries:
    add: str
    put: str
    done: str
    load_chat: str
    load_all: str


# An added record wakes the chat's holder, wherever it runs: the notification is delivered when
# the insert commits, never before.
_QUERIES: Final = {
    "telegram_inbox": _Queries(
        add="WITH added AS (INSERT INTO telegram_inbox (bot, name, chat, sealed) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (bot, name) DO NOTHING RETURNING chat) "
        "SELECT pg_notify('playa_records', $1 || ' ' || chat) FROM added",
        put="INSERT INTO telegram_inbox (bot, name, chat, sealed) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (bot, name) DO UPDATE SET sealed = EXCLUDED.sealed, chat = EXCLUDED.chat",
        # The name stays (the bytes go): the same update received again is known.
        done="UPDATE telegram_inbox SET handled_at = now(), sealed = '' WHERE bot = $1 AND name = $2",
        load_chat="SELECT name, sealed FROM telegram_inbox "
        "WHERE bot = $1 AND chat = $2 AND handled_at IS NULL ORDER BY name",
        load_all="SELECT name, sealed FROM telegram_inbox WHERE bot = $1 AND handled_at IS NULL ORDER BY name",
    ),
    "telegram_outbox": _Queries(
        add="WITH added AS (INSERT INTO telegram_outbox (bot, name, chat, sealed) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (bot, name) DO NOTHING RETURNING chat) "
        "SELECT pg_notify('playa_records', $1 || ' ' || chat) FROM added",
        put="INSERT INTO telegram_outbox (bot, name, chat, sealed) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (bot, name) DO UPDATE SET sealed = EXCLUDED.sealed, chat = EXCLUDED.chat",
        done="DELETE FROM telegram_outbox WHERE bot = $1 AND name = $2",
        load_chat="SELECT name, sealed FROM telegram_outbox WHERE bot = $1 AND chat = $2 ORDER BY name",
        load_all="SELECT name, sealed FROM telegram_outbox WHERE bot = $1 ORDER BY name",
    ),
}


class RecordTable:
    """One kind of record (``telegram_inbox`` or ``telegram_outbox``) of every bot."""

    def __init__(self, database: Database, table: Literal["telegram_inbox", "telegram_outbox"]) -> None:
        self._database = database
        self._sql = _QUERIES[table]

    async def add(self, bot: str, name: str, chat: str, sealed: bytes) -> bool:
        added = await self._database.fetch(self._sql.add, bot, name, chat, sealed)
        return bool(added)

    async def put(self, bot: str, name: str, chat: str, sealed: bytes) -> None:
        await self._database.execute(self._sql.put, bot, name, chat, sealed)

    async def done(self, bot: str, name: str) -> None:
        await self._database.execute(self._sql.done, bot, name)

    async def load(self, bot: str, chat: str | None = None) -> list[tuple[str, bytes]]:
        if chat is None:
            rows = await self._database.fetch(self._sql.load_all, bot)
        else:
            rows = await self._database.fetch(self._sql.load_chat, bot, chat)
        return [(row["name"], row["sealed"]) for row in rows]
