"""The chats' workspaces (``WorkspaceRows``) in PostgreSQL."""

from __future__ import annotations

from ..core import over_quota
from ._pool import Database

__all__ = ["WorkspaceTable"]


class WorkspaceTable:
    """The chats' files: one row each; ``workspace_usage`` (kept by a trigger) is what the quota sees."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def paths(self, scope: str, prefix: str) -> list[str]:
        rows = await self._database.fetch(
            "SELECT path FROM workspace_files WHERE chat = $1 AND starts_with(path, $2) ORDER BY path",
            scope,
            prefix,
        )
        return [row["path"] for row in rows]

    async def read(self, scope: str, path: str) -> bytes | None:
        data: bytes | None = await self._database.fetchval(
            "SELECT content FROM workspace_files WHERE chat = $1 AND path = $2", scope, path
        )
        return data

    async def write(self, scope: str, path: str, data: bytes, *, quota: int | None) -> None:
        async with self._database.transaction() as connection:
            await connection.execute(
                "INSERT INTO workspace_files (chat, path, content) VALUES ($1, $2, $3) "
                "ON CONFLICT (chat, path) DO UPDATE SET content = EXCLUDED.content, updated_at = now()",
                scope,
                path,
                data,
            )
            if quota is not None:
                # The usage row, updated by the trigger in this transaction and locked by it: two
                # writes of one chat cannot both pass the check against the old total.
                total: int = await connection.fetchval(
                    "SELECT bytes FROM workspace_usage WHERE chat = $1", scope
                )
                if total > quota:
                    raise over_quota(len(data), total, quota)  # rolls the write back

    async def delete(self, scope: str, path: str) -> bool:
        done: str = await self._database.execute(
            "DELETE FROM workspace_files WHERE chat = $1 AND path = $2", scope, path
        )
        return done != "DELETE 0"

    async def move(self, old_scope: str, new_scope: str) -> bool:
        async with self._database.transaction() as connection:
            if await connection.fetchval(
                "SELECT EXISTS (SELECT 1 FROM workspace_files WHERE chat = $1)", new_scope
            ):
                return False
            # One UPDATE: the trigger moves the bytes from the old chat's usage to the new one's.
            await connection.execute(
                "UPDATE workspace_files SET chat = $2 WHERE chat = $1", old_scope, new_scope
            )
        return True

    async def scopes(self) -> list[str]:
        """Every chat that has files here, sorted (for ``playa db export``)."""
        rows = await self._database.fetch("SELECT DISTINCT chat FROM workspace_files ORDER BY chat")
        return [row["chat"] for row in rows]
