"""The process's pool of connections to PostgreSQL, and the transactions every store runs in.

One pool per process (asyncpg's: measured against psycopg 3 with psycopg-pool on a turn's
transaction, it costs the process about half the CPU; ``bench/bench_db.py``). It is opened
from a :class:`~playa.db.DatabaseUrl`, whose keyword arguments reach the driver one by one:
the URL as text never does. Every failure leaves here as a ``DatabaseError`` (``_errors``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

import anyio
import asyncpg
import asyncpg.pool

from ..exceptions import ConfigError, DatabaseError
from ._errors import translated
from ._url import DatabaseUrl

__all__ = ["Connection", "Database", "PoolOptions"]

logger = logging.getLogger(__name__)

Connection: TypeAlias = "asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"
"""A connection of the pool, as the stores use it (asyncpg's, lent by the pool)."""

DEFAULT_CONNECT_TIMEOUT: Final = 10.0
CLOSE_TIMEOUT: Final = 10.0
"""How long closing waits for connections still in use before it terminates them."""

Isolation: TypeAlias = Literal["read_committed", "repeatable_read", "serializable"]


@dataclass(frozen=True, kw_only=True)
class PoolOptions:
    """How many connections the process keeps, and how long a connect or a statement may take."""

    min_size: int = 1
    """Connections opened at start (so a wrong URL fails there, not on the first message)."""
    max_size: int = 10
    connect_timeout: float | None = None
    """Seconds for one connect and login; None: the URL's ``connect_timeout``, else 10."""
    statement_timeout: float = 30.0
    """Seconds a statement may run before the client cancels it."""

    def __post_init__(self) -> None:
        if not 0 <= self.min_size <= self.max_size or self.max_size < 1:
            raise ConfigError(
                f"the pool's sizes must be 0 <= min ({self.min_size}) <= max ({self.max_size}), max >= 1"
            )
        for name in ("connect_timeout", "statement_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"the pool's {name} must be a positive number of seconds")


class Database:
    """An open pool of connections to one database; ``async with Database.open(url) as db``.

    A store's single statement runs on a connection of the pool (``execute``, ``fetch``,
    ``fetchrow``, ``fetchval``, as asyncpg's ``Pool`` offers them); statements that go together
    run in ``transaction()``: a connection of the pool in a transaction, committed when the block
    ends, rolled back when it raises. ``aclose`` is idempotent and bounded.
    """

    def __init__(self, pool: asyncpg.Pool[asyncpg.Record], url: DatabaseUrl) -> None:
        self._pool = pool
        self.url = url
        self._closed = False

    @classmethod
    async def open(cls, url: DatabaseUrl, options: PoolOptions | None = None) -> Database:
        """Connect (``options.min_size`` connections, at least one login checked); raises DatabaseError."""
        options = options or PoolOptions()
        timeout = options.connect_timeout or url.connect_timeout or DEFAULT_CONNECT_TIMEOUT
        with translated(url.where):
            pool = await asyncpg.create_pool(
                **url.connect_arguments(),
                timeout=timeout,
                command_timeout=options.statement_timeout,
                min_size=options.min_size,
                max_size=options.max_size,
            )
        database = cls(pool, url)
        if options.min_size == 0:
            await database.fetchval("SELECT 1")  # the login, checked now
        logger.info("connected to PostgreSQL at %s", url.where)
        return database

    async def __aenter__(self) -> Database:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """A connection of the pool for the block, outside any transaction (each statement commits)."""
        with translated(self.url.where):
            async with self._pool.acquire() as connection:
                yield connection

    async def execute(self, query: str, *args: object) -> str:
        """Run one statement outside any transaction; its status (``DELETE 3``)."""
        async with self.connection() as connection:
            return await connection.execute(query, *args)

    async def fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        """Run one statement; the rows it returns."""
        async with self.connection() as connection:
            return await connection.fetch(query, *args)

    async def fetchrow(self, query: str, *args: object) -> asyncpg.Record | None:
        """Run one statement; the first row it returns, or None."""
        async with self.connection() as connection:
            return await connection.fetchrow(query, *args)

    async def fetchval(self, query: str, *args: object) -> Any:
        """Run one statement; the first column of its first row, or None."""
        async with self.connection() as connection:
            return await connection.fetchval(query, *args)

    @contextlib.asynccontextmanager
    async def transaction(self, *, isolation: Isolation = "read_committed") -> AsyncIterator[Connection]:
        """A connection in a transaction: committed when the block ends, rolled back if it raises."""
        with translated(self.url.where):
            async with self._pool.acquire() as connection, connection.transaction(isolation=isolation):
                yield connection

    @contextlib.asynccontextmanager
    async def dedicated(self) -> AsyncIterator[asyncpg.Connection[asyncpg.Record]]:
        """A connection of its own for the block, outside the pool: one that holds session state
        (a LISTEN, an advisory lock) for as long as it lives, which the pool would reset."""
        timeout = self.url.connect_timeout or DEFAULT_CONNECT_TIMEOUT
        with translated(self.url.where):
            connection: asyncpg.Connection[asyncpg.Record] = await asyncpg.connect(
                **self.url.connect_arguments(), timeout=timeout
            )
        try:
            yield connection
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                try:
                    await connection.close()
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                    connection.terminate()

    async def ping(self) -> None:
        """One ``SELECT 1`` on a connection of the pool (a health check); raises DatabaseError."""
        await self.fetchval("SELECT 1")

    async def aclose(self) -> None:
        """Close the pool: connections in use get ``CLOSE_TIMEOUT`` seconds, then are terminated."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            try:
                with anyio.fail_after(CLOSE_TIMEOUT), translated(self.url.where):
                    await self._pool.close()
            except (TimeoutError, DatabaseError) as exc:
                logger.warning("PostgreSQL pool did not close in time (%s); terminating it", exc)
                self._pool.terminate()

    def __repr__(self) -> str:
        return f"<Database {self.url.where}{' closed' if self._closed else ''}>"
