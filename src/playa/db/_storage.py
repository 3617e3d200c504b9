"""A chat's servers and history in PostgreSQL: the core's ``Storage`` seams, filled with rows.

Rows hold opaque bytes: the server entries and their record arrive sealed (``mcp_remote.store``),
the history's messages as their JSON. Only the chat's scope, names and sequence numbers are
what queries find.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..core import ServerRow, StoredServers
from ._audit import AuditTable
from ._host_key import claim_host_key
from ._leases import ChatLeaseTable
from ._logins import LoginTable
from ._pool import Connection, Database
from ._records import RecordTable
from ._workspace import WorkspaceTable

__all__ = ["DatabaseStorage", "HistoryTable", "ServerTable"]


_APPEND_HISTORY: Final = """
INSERT INTO history (chat, seq, message)
SELECT $1, coalesce((SELECT max(seq) FROM history WHERE chat = $1), 0) + t.n, t.message
FROM unnest($2::bytea[]) WITH ORDINALITY AS t(message, n)
"""
_HEAD: Final = "SELECT generation, record FROM server_stores WHERE chat = $1"
_HEAD_LOCKED: Final = _HEAD + " FOR UPDATE"


async def _stored(connection: Connection, scope: str, *, lock: bool) -> StoredServers:
    head = await connection.fetchrow(_HEAD_LOCKED if lock else _HEAD, scope)
    if head is None:
        return StoredServers()
    rows = await connection.fetch("SELECT name, generation, entry FROM servers WHERE chat = $1", scope)
    return StoredServers(
        head["generation"],
        head["record"],
        {row["name"]: ServerRow(row["generation"], row["entry"]) for row in rows},
    )


class ServerTable:
    """The chats' server rows (``ServerRows``): ``server_stores`` is each chat's lock and record."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def generation(self, scope: str) -> int:
        generation: int | None = await self._database.fetchval(
            "SELECT generation FROM server_stores WHERE chat = $1", scope
        )
        return generation or 0

    async def read(self, scope: str) -> StoredServers:
        # One snapshot for the record and the rows: a write between them cannot pair a record
        # with rows it does not describe (which would read as tampering).
        async with self._database.transaction(isolation="repeatable_read") as connection:
            return await _stored(connection, scope, lock=False)

    async def update(
        self, scope: str, change: Callable[[StoredServers], StoredServers | None]
    ) -> StoredServers:
        async with self._database.transaction() as connection:
            # The chat's head row is its lock: made if missing, then held FOR UPDATE until commit.
            await connection.execute(
                "INSERT INTO server_stores (chat) VALUES ($1) ON CONFLICT (chat) DO NOTHING", scope
            )
            current = await _stored(connection, scope, lock=True)
            new = change(current)
            if new is None:
                return current
            if gone := [name for name in current.rows if name not in new.rows]:
                await connection.execute(
                    "DELETE FROM servers WHERE chat = $1 AND name = ANY($2::text[])", scope, gone
                )
            if written := [
                (scope, name, row.generation, row.entry)
                for name, row in new.rows.items()
                if current.rows.get(name) != row
            ]:
                await connection.executemany(
                    "INSERT INTO servers (chat, name, generation, entry) VALUES ($1, $2, $3, $4) "
                    "ON CONFLICT (chat, name) DO UPDATE SET generation = EXCLUDED.generation, entry = EXCLUDED.entry",
                    written,
                )
            await connection.execute(
                "UPDATE server_stores SET generation = $2, record = $3, entries = $4, updated_at = now() "
                "WHERE chat = $1",
                scope,
                new.generation,
                new.record,
                len(new.rows),
            )
            return new


class HistoryTable:
    """The chats' conversations (``HistoryRows``): one message a row, numbered from 1."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def load(self, scope: str) -> list[bytes]:
        rows = await self._database.fetch("SELECT message FROM history WHERE chat = $1 ORDER BY seq", scope)
        return [row["message"] for row in rows]

    async def append(self, scope: str, messages: Sequence[bytes]) -> None:
        if not messages:
            return
        # One statement, one round trip: the turn's rows numbered after the chat's last, in order.
        # A turn's append costs this and the commit's flush, whatever the history's length.
        await self._database.execute(_APPEND_HISTORY, scope, list(messages))

    async def clear(self, scope: str) -> None:
        await self._database.execute("DELETE FROM history WHERE chat = $1", scope)

    async def move(self, old_scope: str, new_scope: str) -> bool:
        async with self._database.transaction() as connection:
            if await connection.fetchval("SELECT EXISTS (SELECT 1 FROM history WHERE chat = $1)", new_scope):
                return False
            await connection.execute("UPDATE history SET chat = $2 WHERE chat = $1", old_scope, new_scope)
        return True


@dataclass(eq=False)
class DatabaseStorage:
    """The chats' state in one database (the core's ``Storage``), over the process's pool."""

    database: Database
    servers: ServerTable = field(init=False)
    history: HistoryTable = field(init=False)
    workspace: WorkspaceTable = field(init=False)
    logins: LoginTable = field(init=False)
    inbox: RecordTable = field(init=False)
    outbox: RecordTable = field(init=False)
    leases: ChatLeaseTable = field(init=False)
    audit: AuditTable = field(init=False)

    def __post_init__(self) -> None:
        self.servers = ServerTable(self.database)
        self.history = HistoryTable(self.database)
        self.workspace = WorkspaceTable(self.database)
        self.logins = LoginTable(self.database)
        self.inbox = RecordTable(self.database, "telegram_inbox")
        self.outbox = RecordTable(self.database, "telegram_outbox")
        self.leases = ChatLeaseTable(self.database)
        self.audit = AuditTable(self.database)

    def __repr__(self) -> str:
        return f"DatabaseStorage({self.where})"

    @property
    def where(self) -> str:
        return f"PostgreSQL at {self.database.url.where}"

    async def scopes(self) -> list[str]:
        """Every chat that has servers or history here, sorted (for ``playa db export``)."""
        rows = await self.database.fetch(
            "SELECT chat FROM server_stores WHERE generation > 0 UNION SELECT chat FROM history ORDER BY chat"
        )
        return [row["chat"] for row in rows]

    async def claim_key(self, purpose: str, key_id: str) -> None:
        await claim_host_key(self.database, purpose=purpose, key_id=key_id)
