"""Versioned schema migrations: ordered SQL files in ``migrations/``, applied once each.

``migrations/NNNN_name.sql`` is schema version NNNN; versions start at 1 and have no gaps. The
table ``schema_version`` records each version applied (its number, name and time). ``upgrade``
applies the versions the database lacks, in order, in one transaction: all of them or, when
one fails, none (PostgreSQL's DDL is transactional), so a database is never half upgraded.

Two processes may upgrade at once (two replicas started together): each first takes one
transaction-scoped advisory lock, so the second waits for the first to commit, then finds
nothing left to apply. The wait is bounded by ``lock_timeout``. A database whose version is
newer than this Playa knows is refused: an older Playa must not write to a newer schema.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Final

from ..exceptions import DatabaseError
from ._pool import Connection, Database

__all__ = ["LOCK_KEY", "Migration", "Upgrade", "latest_version", "migrations", "schema_version", "upgrade"]

logger = logging.getLogger(__name__)

LOCK_KEY: Final = 0x706C617961_000001
"""The advisory lock every upgrade takes (``playa`` in ASCII, then 1): one upgrade at a time."""
LOCK_TIMEOUT: Final = "60s"
"""How long an upgrade waits for another one to finish."""
UPGRADE_TIMEOUT: Final = 600.0
"""Seconds the statements of one upgrade may take in all (a large table's new index)."""
_NAME: Final = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")

_BOOTSTRAP: Final = """
CREATE TABLE IF NOT EXISTS schema_version (
    version    integer PRIMARY KEY CHECK (version > 0),
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True)
class Migration:
    """One schema version: its number, its name and the SQL that makes it."""

    version: int
    name: str
    sql: str


@dataclass(frozen=True)
class Upgrade:
    """What ``upgrade`` did: the version before and after, and the migrations it applied."""

    before: int
    after: int
    applied: tuple[Migration, ...]


@cache
def migrations() -> tuple[Migration, ...]:
    """Every migration in the package, in order; a gap or a stray file is a packaging error."""
    found: list[Migration] = []
    for entry in files(__package__ or "playa.db").joinpath("migrations").iterdir():
        if entry.name.startswith((".", "_")):
            continue
        match = _NAME.fullmatch(entry.name)
        if match is None:
            raise RuntimeError(f"migrations/{entry.name} is not named NNNN_name.sql")
        found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration versions must be 1, 2, 3… without gaps: {[m.version for m in found]}")
    return tuple(found)


def latest_version() -> int:
    """The schema version this Playa makes and expects."""
    return len(migrations())


async def _current(connection: Connection) -> int:
    """The database's schema version (0 when nothing was applied yet)."""
    exists = await connection.fetchval("SELECT to_regclass('schema_version') IS NOT NULL")
    if not exists:
        return 0
    version: int | None = await connection.fetchval("SELECT max(version) FROM schema_version")
    return version or 0


def _refuse_newer(database: Database, version: int) -> None:
    if version > latest_version():
        raise DatabaseError(
            f"its schema is version {version}, newer than this Playa's {latest_version()}: "
            "run the newer Playa, or upgrade this one",
            where=database.url.where,
        )


async def schema_version(database: Database) -> int:
    """The database's schema version now (0: empty); raises DatabaseError if it is newer than ours."""
    async with database.connection() as connection:
        version = await _current(connection)
    _refuse_newer(database, version)
    return version


async def upgrade(database: Database) -> Upgrade:
    """Bring the database to :func:`latest_version`; a no-op when it is there. Safe to run at once
    from several processes (advisory lock); raises DatabaseError."""
    async with database.transaction() as connection:
        await connection.execute("SELECT set_config('lock_timeout', $1, true)", LOCK_TIMEOUT)
        await connection.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
        await connection.execute(_BOOTSTRAP)
        before = await _current(connection)
        _refuse_newer(database, before)
        pending = migrations()[before:]
        for migration in pending:
            await connection.execute(migration.sql, timeout=UPGRADE_TIMEOUT)
            await connection.execute(
                "INSERT INTO schema_version (version, name) VALUES ($1, $2)",
                migration.version,
                migration.name,
            )
    if pending:
        logger.info("PostgreSQL schema upgraded from version %d to %d", before, pending[-1].version)
    return Upgrade(before, before + len(pending), pending)
