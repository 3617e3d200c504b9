"""The chats' audit logs (``AuditRows``) in PostgreSQL: ``audit_records`` and ``audit_heads``.

The rows hold each record's line and the head exactly as the log's files would (chained, MACed
and sealed by ``mcp_remote.store``): nothing in them is secret, and nothing in them can be
changed, removed or put back unseen by the verifier. What the database adds is the one
transaction: the records and the head that names the last of them are written together, over
the head the writer read, so the head always names the log's last record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import asyncpg

from ._pool import Connection, Database

__all__ = ["AuditTable"]

_RECORDS: Final = "SELECT seq, record FROM audit_records WHERE chat = $1"
_HEAD: Final = "SELECT head FROM audit_heads WHERE chat = $1"


class _Lost(Exception):
    """Another writer's head, or one of its records, is there: the transaction is rolled back."""


async def _replace_head(connection: Connection, scope: str, known: bytes | None, head: bytes) -> bool:
    if known is None:
        done: str = await connection.execute(
            "INSERT INTO audit_heads (chat, head) VALUES ($1, $2) ON CONFLICT (chat) DO NOTHING", scope, head
        )
    else:
        # Under READ COMMITTED a writer that waited for another's row lock checks ``head = $3``
        # against the row the other committed: it finds its head gone, and writes nothing.
        done = await connection.execute(
            "UPDATE audit_heads SET head = $2 WHERE chat = $1 AND head = $3", scope, head, known
        )
    return done.endswith(" 1")


class AuditTable:
    """The chats' audit records, one row each by sequence number, and each chat's head."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def append(
        self, scope: str, known: bytes | None, records: Sequence[tuple[int, bytes]], head: bytes
    ) -> bool:
        try:
            async with self._database.transaction() as connection:
                if not await _replace_head(connection, scope, known, head):
                    raise _Lost
                try:
                    # A savepoint: a number taken (a head put back over later records) is a lost
                    # race to report, not a failed transaction to translate.
                    async with connection.transaction():
                        await connection.executemany(
                            "INSERT INTO audit_records (chat, seq, record) VALUES ($1, $2, $3)",
                            [(scope, seq, record) for seq, record in records],
                        )
                except asyncpg.UniqueViolationError:
                    raise _Lost from None
        except _Lost:
            return False
        return True

    async def read(self, scope: str) -> tuple[bytes | None, list[tuple[int, bytes]]]:
        # One snapshot: an append between the two reads cannot pair a head with records it does
        # not describe (which would read as a cut or a rollback).
        async with self._database.transaction(isolation="repeatable_read") as connection:
            head: bytes | None = await connection.fetchval(_HEAD, scope)
            rows = await connection.fetch(_RECORDS + " ORDER BY seq", scope)
        return head, [(row["seq"], row["record"]) for row in rows]

    async def last(self, scope: str, count: int) -> tuple[bytes | None, list[tuple[int, bytes]]]:
        async with self._database.transaction(isolation="repeatable_read") as connection:
            head: bytes | None = await connection.fetchval(_HEAD, scope)
            rows = await connection.fetch(_RECORDS + " ORDER BY seq DESC LIMIT $2", scope, count)
        return head, [(row["seq"], row["record"]) for row in reversed(rows)]

    async def move(self, old_scope: str, new_scope: str) -> bool:
        async with self._database.transaction() as connection:
            if await connection.fetchval(
                "SELECT EXISTS (SELECT 1 FROM audit_records WHERE chat = $1) "
                "OR EXISTS (SELECT 1 FROM audit_heads WHERE chat = $1)",
                new_scope,
            ):
                return False
            await connection.execute(
                "UPDATE audit_records SET chat = $2 WHERE chat = $1", old_scope, new_scope
            )
            await connection.execute("UPDATE audit_heads SET chat = $2 WHERE chat = $1", old_scope, new_scope)
        return True

    async def scopes(self) -> list[str]:
        async with self._database.connection() as connection:
            rows = await connection.fetch(
                "SELECT chat FROM audit_heads UNION SELECT DISTINCT chat FROM audit_records ORDER BY chat"
            )
        return [row["chat"] for row in rows]

    async def replace(self, scope: str, head: bytes, records: Sequence[tuple[int, bytes]]) -> None:
        """Make the chat's log ``records`` and ``head`` (``playa db import``: a verified log)."""
        async with self._database.transaction() as connection:
            await connection.execute("DELETE FROM audit_records WHERE chat = $1", scope)
            await connection.execute(
                "INSERT INTO audit_heads (chat, head) VALUES ($1, $2) "
                "ON CONFLICT (chat) DO UPDATE SET head = EXCLUDED.head",
                scope,
                head,
            )
            await connection.executemany(
                "INSERT INTO audit_records (chat, seq, record) VALUES ($1, $2, $3)",
                [(scope, seq, record) for seq, record in records],
            )
