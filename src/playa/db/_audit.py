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

from ..exceptions import DatabaseError
from ._pool import Database

__all__ = ["AuditTable"]

_RECORDS: Final = "SELECT seq, record FROM audit_records WHERE chat = $1"
_HEAD: Final = "SELECT head FROM audit_heads WHERE chat = $1"


_APPEND: Final = """
WITH head AS ({head} RETURNING chat)
INSERT INTO audit_records (chat, seq, record)
SELECT head.chat, t.seq, t.record FROM head, unnest($4::bigint[], $5::bytea[]) AS t(seq, record)
"""
# Under READ COMMITTED a writer that waited for another's row lock checks ``head = $3`` against
# the row the other committed: it finds its head gone, updates nothing, and so inserts nothing.
_OVER_HEAD: Final = _APPEND.format(head="UPDATE audit_heads SET head = $2 WHERE chat = $1 AND head = $3")
_FIRST_HEAD: Final = _APPEND.format(
    head="INSERT INTO audit_heads (chat, head) SELECT $1, $2 WHERE $3::bytea IS NULL ON CONFLICT (chat) DO NOTHING"
)
_TAKEN: Final = "23505"
"""unique_violation: a record's number is taken (a head put back over later records)."""


class AuditTable:
    """The chats' audit records, one row each by sequence number, and each chat's head."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def append(
        self, scope: str, known: bytes | None, records: Sequence[tuple[int, bytes]], head: bytes
    ) -> bool:
        # One statement, one round trip, atomic: the head replaced only over ``known``, and the
        # records inserted only when it was.
        try:
            done: str = await self._database.execute(
                _FIRST_HEAD if known is None else _OVER_HEAD,
                scope,
                head,
                known,
                [seq for seq, _ in records],
                [record for _, record in records],
            )
        except DatabaseError as exc:
            if exc.sqlstate == _TAKEN:
                return False
            raise
        return done != "INSERT 0 0"

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
        rows = await self._database.fetch(
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
