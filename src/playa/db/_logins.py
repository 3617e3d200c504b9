"""Pending OAuth logins (the core's ``PendingLogins``) and the redirects handed between processes.

A login waits in the process that began it; its redirect reaches whichever process the load
balancer picks. That process takes the pending login (once) and hands the redirect's query,
sealed by mcp_remote, to ``oauth_redirects``; a NOTIFY wakes the waiting process, which takes
the query (once), completes the login and writes the outcome, which a second NOTIFY announces to
the process whose browser waits for it. Both sides also poll, bounded: a notification is a hint,
the rows are the truth. Rows are found by the SHA-256 of the login's ``state``, never the state.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Final

import anyio
import asyncpg

from ..exceptions import DatabaseError
from ._errors import translated
from ._pool import Database

__all__ = ["HANDED", "OUTCOMES", "LoginTable"]

HANDED: Final = "playa_oauth_redirects"
"""The NOTIFY channel a handed redirect is announced on: the payload is its state's hash in hex."""
OUTCOMES: Final = "playa_oauth_outcomes"
"""The NOTIFY channel a redirect's outcome is announced on: the payload is its state's hash in hex."""
OUTCOME_POLL: Final = 0.5
"""Seconds between two reads of a redirect's outcome while its browser waits (a missed NOTIFY)."""

_HAND: Final = """
WITH handed AS (
    INSERT INTO oauth_redirects (state_hash, sealed, expires_at)
    VALUES ($1, $2, now() + make_interval(secs => $3))
    ON CONFLICT (state_hash) DO NOTHING RETURNING state_hash
)
SELECT pg_notify('playa_oauth_redirects', encode(state_hash, 'hex')) FROM handed
"""
# The outer `outcome IS NULL` is checked again on a row another taker changed meanwhile: of two
# takers, one gets the query. The query's seal goes as it is taken.
_RECEIVED: Final = """
UPDATE oauth_redirects AS r SET sealed = '', outcome = ''
FROM (SELECT state_hash, sealed FROM oauth_redirects
      WHERE state_hash = ANY($1::bytea[]) AND outcome IS NULL AND expires_at > now()
      FOR UPDATE) AS t
WHERE r.state_hash = t.state_hash AND r.outcome IS NULL
RETURNING t.state_hash, t.sealed
"""
_ANSWER: Final = """
WITH answered AS (
    UPDATE oauth_redirects SET outcome = $2 WHERE state_hash = $1 RETURNING state_hash
)
SELECT pg_notify('playa_oauth_outcomes', encode(state_hash, 'hex')) FROM answered
"""
_OUTCOME: Final = (
    "DELETE FROM oauth_redirects WHERE state_hash = $1 AND outcome IS NOT NULL AND outcome <> '' "
    "RETURNING outcome"
)


class LoginTable:
    """Pending logins by the SHA-256 of their state, taken once (``DELETE … RETURNING``); and the
    redirects one process hands another for them (``oauth_redirects``)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def put(self, state_hash: bytes, scope: str, server: str, sealed: bytes, expires_at: float) -> None:
        await self._database.execute(
            "INSERT INTO oauth_pending (state_hash, chat, server, sealed, expires_at) "
            "VALUES ($1, $2, $3, $4, $5)",
            state_hash,
            scope,
            server,
            sealed,
            datetime.fromtimestamp(expires_at, UTC),
        )

    async def take(self, state_hash: bytes, now: float) -> tuple[str, str, bytes] | None:
        async with self._database.transaction() as connection:
            # One statement: of two takers the second finds the row gone (or waits, then finds it
            # gone), so one login is completed once. Expired logins go with it.
            row = await connection.fetchrow(
                "DELETE FROM oauth_pending WHERE state_hash = $1 RETURNING chat, server, sealed, expires_at",
                state_hash,
            )
            await connection.execute(
                "DELETE FROM oauth_pending WHERE expires_at <= $1", datetime.fromtimestamp(now, UTC)
            )
        if row is None or row["expires_at"].timestamp() <= now:
            return None
        return row["chat"], row["server"], row["sealed"]

    async def hand(self, state_hash: bytes, sealed: bytes, keep: float) -> None:
        """Keep a redirect's sealed query for ``keep`` seconds, for the process whose login it is,
        and wake every process that listens (``listen``) when it is committed."""
        async with self._database.transaction() as connection:
            await connection.execute("DELETE FROM oauth_redirects WHERE expires_at <= now()")
            await connection.execute(_HAND, state_hash, sealed, keep)

    async def received(self, state_hashes: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
        """The sealed queries handed for these logins (state hash, sealed), each taken once."""
        if not state_hashes:
            return []
        rows = await self._database.fetch(_RECEIVED, list(state_hashes))
        return [(row["state_hash"], row["sealed"]) for row in rows]

    async def answer(self, state_hash: bytes, outcome: str) -> None:
        """What the browser of a handed redirect is told, for the process that received it."""
        await self._database.execute(_ANSWER, state_hash, outcome)

    async def outcome(self, state_hash: bytes, wait: float) -> str | None:
        """The answer to a handed redirect (its row removed with it), waited for at most ``wait``
        seconds; None when none came in time (the row then stays until it expires)."""
        answered = anyio.Event()

        def notified(_connection: object, _pid: int, _channel: str, payload: object) -> None:
            if payload == state_hash.hex():
                answered.set()

        with anyio.move_on_after(wait):
            async with self._listening(OUTCOMES, notified):
                while True:
                    found: str | None = await self._database.fetchval(_OUTCOME, state_hash)
                    if found is not None:
                        return found
                    with anyio.move_on_after(OUTCOME_POLL):
                        await answered.wait()
                    answered = anyio.Event()
        return None

    @contextlib.asynccontextmanager
    async def listen(self, woken: Callable[[bytes], None]) -> AsyncIterator[None]:
        """For the block, ``woken(state_hash)`` is called when any process hands a redirect."""

        def notified(_connection: object, _pid: int, _channel: str, payload: object) -> None:
            try:
                state_hash = bytes.fromhex(str(payload))
            except ValueError:
                return
            woken(state_hash)

        async with self._listening(HANDED, notified):
            yield

    @contextlib.asynccontextmanager
    async def _listening(
        self, channel: str, notified: Callable[[object, int, str, object], None]
    ) -> AsyncIterator[None]:
        async with self._database.dedicated() as connection:
            with translated(self._database.url.where):
                await connection.add_listener(channel, notified)
            try:
                yield
            finally:
                with (
                    contextlib.suppress(DatabaseError, OSError, asyncpg.InterfaceError),
                    translated(self._database.url.where),
                ):
                    await connection.remove_listener(channel, notified)
