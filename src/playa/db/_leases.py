"""Which process serves each chat (the core's ``ChatLeases``): a lease per chat, in one table.

A lease is taken in one statement that succeeds only when nobody holds the chat, its holder's
lease has expired, or the taker is its holder: two processes racing for a chat cannot both win.
Times are the database's (``now()``), so the processes' clocks never disagree about a lease.

A new record wakes the chat's holder through PostgreSQL's LISTEN/NOTIFY, on a connection of its
own; the poller's leadership is a session-level advisory lock on another, held while that
connection lives: a process that dies, or loses its connection, loses the lock with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final

import anyio
import asyncpg

from ..core import LeaseTaken
from ..exceptions import DatabaseError
from ._errors import translated
from ._pool import Database
from ._records import CHANNEL

__all__ = ["ChatLeaseTable", "Leader"]

logger = logging.getLogger(__name__)

_TAKE: Final = """
INSERT INTO chat_leases AS l (bot, chat, holder, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
ON CONFLICT (bot, chat) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
RETURNING (xmax = 0) AS new, (SELECT holder FROM chat_leases WHERE bot = $1 AND chat = $2) AS before
"""
_ORPHANS: Final = """
SELECT chat FROM (
    SELECT DISTINCT chat FROM telegram_inbox WHERE bot = $1 AND handled_at IS NULL
    UNION SELECT DISTINCT chat FROM telegram_outbox WHERE bot = $1
) AS waiting
WHERE NOT EXISTS (
    SELECT 1 FROM chat_leases l
    WHERE l.bot = $1 AND l.chat = waiting.chat AND l.expires_at >= now() AND l.holder <> $2
)
ORDER BY chat LIMIT $3
"""
_PRUNE: Final = """
DELETE FROM telegram_inbox WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM telegram_inbox
    WHERE bot = $1 AND handled_at IS NOT NULL AND handled_at < now() - make_interval(secs => $2)
    LIMIT 10000))
"""


def _lock_key(bot: str, what: str) -> int:
    """A signed 64-bit advisory lock key for ``what`` of ``bot``."""
    digest = hashlib.sha256(f"playa {what} {bot}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Leader:
    """The advisory lock of ``leader()`` on its own connection (the core's ``Leadership``)."""

    def __init__(self, connection: asyncpg.Connection[Any] | None, where: str) -> None:
        self._connection = connection
        self._where = where

    @property
    def held(self) -> bool:
        return self._connection is not None

    async def check(self) -> bool:
        connection = self._connection
        if connection is None:
            return False
        try:
            with translated(self._where):
                await connection.fetchval("SELECT 1", timeout=10.0)
        except DatabaseError as exc:
            logger.warning("the leadership's connection failed (%s): leadership lost", exc)
            self._connection = None
            return False
        return True


class ChatLeaseTable:
    """The chats' leases (``chat_leases``), their wake-ups and the poller's leadership."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def take(self, bot: str, chat: str, holder: str, seconds: float) -> LeaseTaken | None:
        # `before` reads the snapshot the statement started from: the holder it replaced.
        row = await self._database.fetchrow(_TAKE, bot, chat, holder, seconds)
        if row is None:
            return None
        if row["new"]:
            return "new"
        return "held" if row["before"] == holder else "moved"

    async def remaining(self, bot: str, chat: str) -> float | None:
        left: float | None = await self._database.fetchval(
            "SELECT extract(epoch FROM expires_at - now())::float8 FROM chat_leases WHERE bot = $1 AND chat = $2",
            bot,
            chat,
        )
        return left

    async def renew(self, bot: str, holder: str, seconds: float) -> set[str]:
        rows = await self._database.fetch(
            "UPDATE chat_leases SET expires_at = now() + make_interval(secs => $3) "
            "WHERE bot = $1 AND holder = $2 RETURNING chat",
            bot,
            holder,
            seconds,
        )
        return {row["chat"] for row in rows}

    async def release(self, bot: str, holder: str, chats: Sequence[str] | None = None) -> None:
        if chats is None:
            await self._database.execute(
                "DELETE FROM chat_leases WHERE bot = $1 AND holder = $2", bot, holder
            )
        elif chats:
            await self._database.execute(
                "DELETE FROM chat_leases WHERE bot = $1 AND holder = $2 AND chat = ANY($3::text[])",
                bot,
                holder,
                list(chats),
            )

    async def orphans(self, bot: str, holder: str, limit: int) -> list[str]:
        rows = await self._database.fetch(_ORPHANS, bot, holder, limit)
        return [row["chat"] for row in rows]

    async def prune(self, bot: str, older_than: float) -> int:
        done: str = await self._database.execute(_PRUNE, bot, older_than)
        return int(done.rpartition(" ")[2] or 0)

    @contextlib.asynccontextmanager
    async def listen(self, bot: str, woken: Callable[[str], None]) -> AsyncIterator[anyio.Event]:
        def notified(_connection: object, _pid: int, _channel: str, payload: object) -> None:
            who, _, chat = str(payload).partition(" ")
            if who == bot and chat:
                woken(chat)

        lost = anyio.Event()
        async with self._database.dedicated() as connection:
            connection.add_termination_listener(lambda _connection: lost.set())
            with translated(self._database.url.where):
                await connection.add_listener(CHANNEL, notified)
            try:
                yield lost
            finally:
                with (
                    contextlib.suppress(DatabaseError, OSError, asyncpg.InterfaceError),
                    translated(self._database.url.where),
                ):
                    await connection.remove_listener(CHANNEL, notified)

    @contextlib.asynccontextmanager
    async def leader(self, bot: str, what: str) -> AsyncIterator[Leader]:
        async with self._database.dedicated() as connection:
            with translated(self._database.url.where):
                got = await connection.fetchval("SELECT pg_try_advisory_lock($1)", _lock_key(bot, what))
            # Held until this connection closes (a process that dies loses it with its socket).
            yield Leader(connection if got else None, self._database.url.where)
