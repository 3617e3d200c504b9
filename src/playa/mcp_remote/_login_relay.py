"""A login's redirect received by one process and completed by another (several processes, one database).

A login waits in the process that serves its chat; the owner's browser may be sent to any process
behind the public URL. So when a link goes out, the waiting process records the login
(``record``): the SHA-256 of its ``state`` (the state itself, a bearer of the login, is never
stored), its chat and server, and a seal that proves the row is a Playa's. A process that receives
a redirect it does not wait for (``hand``) takes that row, once, and hands the redirect's query
sealed (it holds the authorization code) to the waiting process, whose listener (``serve``) takes
it, once, and completes the login as if it had received the redirect. The browser is told the
outcome when it comes within ``answer_wait`` seconds, else that the chat will tell.

Each seal is made under the host's key, its associated data naming its purpose, the state's hash,
the chat and the server: a sealed query moved to another login, or a row written by anyone without
the key, does not open. A state never seen, expired or used finds no row: the page says so, and
nothing else happens.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol
from urllib.parse import parse_qs

import anyio
import anyio.abc

from ..core import PendingLogins
from ..exceptions import DatabaseError
from .store import Sealer, SealError, canonical_json
from .transport import register_secrets

__all__ = ["RECEIVED", "UNDELIVERED", "UNKNOWN", "LoginRelay", "LoginRows", "WaitingLogin", "state_hash"]

logger = logging.getLogger(__name__)

UNKNOWN: Final = "This login link is unknown, used or expired. Run /mcp_auth again in the chat."
RECEIVED: Final = "Playa received the login. The chat will tell you how it ends. You can close this window."
UNDELIVERED: Final = "Playa could not pass this login on. Run /mcp_auth again in the chat."


class LoginRows(PendingLogins, Protocol):
    """Pending logins (``PendingLogins``) and the redirects handed between processes for them."""

    async def hand(self, state_hash: bytes, sealed: bytes, keep: float) -> None:
        """Keep a redirect's sealed query ``keep`` seconds for the process whose login it is; wake it."""
        ...

    async def received(self, state_hashes: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
        """The sealed queries handed for these logins (state hash, sealed), each taken once."""
        ...

    async def answer(self, state_hash: bytes, outcome: str) -> None:
        """What the browser of a handed redirect is told, for the process that received it."""
        ...

    async def outcome(self, state_hash: bytes, wait: float) -> str | None:
        """The answer to a handed redirect, waited for at most ``wait`` seconds; None if none came."""
        ...

    def listen(self, woken: Callable[[bytes], None]) -> contextlib.AbstractAsyncContextManager[None]:
        """For the block, ``woken(state_hash)`` is called when any process hands a redirect."""
        ...


class WaitingLogin(Protocol):
    """What the relay reads of a login that waits in this process (``PendingLogin``)."""

    scope: str
    owner: str
    server: str
    state: str | None


def state_hash(state: str) -> bytes:
    """What finds a login in the database: the SHA-256 of its state, never the state."""
    return hashlib.sha256(state.encode()).digest()


def _context(purpose: str, hashed: bytes, scope: str, server: str) -> Mapping[str, str]:
    return {"purpose": purpose, "state": hashed.hex(), "scope": scope, "server": server}


@dataclass(eq=False)
class LoginRelay:
    """The logins of this process in ``rows``, and the redirects it hands or completes for another."""

    rows: LoginRows
    sealer: Sealer = field(repr=False)
    answer_wait: float = 5.0
    """Seconds a browser whose redirect was handed on waits for the outcome."""
    poll: float = 2.0
    """Seconds between two looks for handed redirects while logins wait (a NOTIFY missed)."""
    keep: float = 60.0
    """Seconds a handed redirect waits for its process; one that died took its login with it."""
    clock: Callable[[], float] = time.time
    _wake: anyio.Event | None = field(default=None, init=False, repr=False)

    async def record(self, login: WaitingLogin, expires_at: float) -> None:
        """A login's link goes out: its row, so that another process may hand its redirect here."""
        assert login.state is not None
        hashed = state_hash(login.state)
        sealed = self._seal("oauth-pending", hashed, login.scope, login.server, {"owner": login.owner})
        await self.rows.put(hashed, login.scope, login.server, sealed, expires_at)

    async def forget(self, state: str) -> None:
        """The login ended (completed here, expired, replaced): its row goes."""
        await self.rows.take(state_hash(state), self.clock())

    async def hand(self, state: str, query: str) -> str:
        """A redirect this process does not wait for: hand it to the one that does; what to tell the browser."""
        hashed = state_hash(state)
        taken = await self.rows.take(hashed, self.clock())
        if taken is None:
            return UNKNOWN
        scope, server, sealed = taken
        try:
            self._open("oauth-pending", hashed, scope, server, sealed)
        except SealError as exc:
            logger.warning("a pending login's row does not verify (%s): refused", exc.reason)
            return UNKNOWN
        # A login's (found, so no stranger's words): known to the log gate before anything can log.
        params = parse_qs(query, keep_blank_values=True)
        register_secrets([state, *params.get("code", [])])
        await self.rows.hand(
            hashed, self._seal("oauth-redirect", hashed, scope, server, {"query": query}), self.keep
        )
        outcome = await self.rows.outcome(hashed, self.answer_wait)
        return outcome if outcome else RECEIVED

    async def serve(
        self,
        waiting: Mapping[str, WaitingLogin],
        complete: Callable[[str], str],
        *,
        task_status: anyio.abc.TaskStatus[None],
    ) -> None:
        """Complete the logins of this process (``waiting``, by state) whose redirects another process
        handed here, with ``complete`` as if this process had received them; until cancelled."""
        task_status.started()
        while True:
            try:
                async with self.rows.listen(self._woken):
                    while True:
                        # Made before the look: a wake-up during it is kept for the wait.
                        wake = self._wake = anyio.Event()
                        await self._deliver(waiting, complete)
                        with anyio.move_on_after(self.poll):
                            await wake.wait()
            except DatabaseError as exc:
                logger.warning("the login redirects' listener failed (%s); listening again", exc)
                await anyio.sleep(self.poll)

    def _woken(self, hashed: bytes) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _deliver(self, waiting: Mapping[str, WaitingLogin], complete: Callable[[str], str]) -> None:
        """Take the redirects handed for this process's logins, complete each, and answer its browser."""
        by_hash = {state_hash(state): login for state, login in waiting.items()}
        for hashed, sealed in await self.rows.received(list(by_hash)):
            login = by_hash.get(hashed)
            outcome = UNKNOWN
            if login is not None:
                try:
                    query = self._open("oauth-redirect", hashed, login.scope, login.server, sealed)["query"]
                except (SealError, KeyError) as exc:
                    logger.warning(
                        "a handed login redirect does not verify (%s): refused", type(exc).__name__
                    )
                else:
                    outcome = complete(query)
            await self.rows.answer(hashed, outcome)

    def _seal(
        self, purpose: str, hashed: bytes, scope: str, server: str, content: Mapping[str, str]
    ) -> bytes:
        envelope = self.sealer.seal(_context(purpose, hashed, scope, server), content)
        return canonical_json(
            {"v": envelope["v"], "kid": envelope["kid"], "nonce": envelope["nonce"], "ct": envelope["ct"]}
        )

    def _open(self, purpose: str, hashed: bytes, scope: str, server: str, sealed: bytes) -> dict[str, str]:
        try:
            envelope = json.loads(sealed)
        except ValueError:
            envelope = None
        return self.sealer.open(envelope, _context(purpose, hashed, scope, server))
