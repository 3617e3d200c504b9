"""Everything a database holds, as text: for the tests that look for a credential in clear."""

from __future__ import annotations

from playa.db import Database

__all__ = ["SKIPPED", "database_text"]

SKIPPED = frozenset({"schema_version", "host_keys"})
"""Tables that say when the schema was applied or a key claimed: no chat's state."""


async def database_text(database: Database) -> str:
    """Every row of every table but ``SKIPPED``, one line each, by table and in a fixed order; a
    ``bytea`` value as its bytes (Latin-1, so every byte shows), never as PostgreSQL's hex."""
    lines: list[str] = []
    async with database.connection() as c:
        tables = await c.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        for table in [t["tablename"] for t in tables if t["tablename"] not in SKIPPED]:
            rows = await c.fetch(f'SELECT * FROM "{table}"')
            shown = [
                " ".join(v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in row.values())
                for row in rows
            ]
            lines.extend(f"{table}: {row}" for row in sorted(shown))
    return "\n".join(lines)
