"""An ``oauth`` server's login as its server holds it; whom an owner's login is for, and how its start went.

A ``ServerLogin`` belongs to one ``RemoteServer`` and is the only writer of its fields: the
chat's ``Logins`` runs the owner's logins through it, and the server's connects read it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from .store import OAuthGrant, ServerEntry, resource_of
from .transport import GrantStorage

__all__ = ["LoginOwner", "LoginStart", "ServerLogin"]


@dataclass(frozen=True, slots=True)
class LoginOwner:
    """Whom a login is for, and where its words go."""

    id: str
    """The owner's id: only their browser's redirect completes the login."""
    send_link: Callable[[str], Awaitable[object]]
    """Sends to the owner alone (``UI.send_private``): the link, and what only they may see."""
    report: Callable[[str], Awaitable[object]]
    """Says in the chat how a login ended whose link went out (``UI.send``)."""


@dataclass(eq=False)
class LoginStart:
    """How the start of an owner's login went, as far as their command waits for it."""

    settled: anyio.Event = field(default_factory=anyio.Event)
    """Set once the link is sent, or the login ended before that."""
    sent: bool = False
    why: str | None = None
    """Why no link went out (redacted), when the login ended before."""
    waiting: bool = True
    """The command still waits: an end before the link goes into its reply, not to ``report``."""


@dataclass(eq=False)
class ServerLogin:
    """An ``oauth`` server's login: its grant as held now, the owner's login in flight, what it replaced."""

    grant: GrantStorage | None = None
    """The grant as held now (tokens change as they are refreshed); made on first use."""
    flight: anyio.CancelScope | None = None
    """The owner's login in flight, if any."""
    superseded: OAuthGrant | None = None
    """The grant of the OAuth entry this one replaced (``/mcp_add`` with its name): revoked once
    a new grant is stored, or once the entry connects without needing a login."""
    refused: int = 0
    """Logins in a row whose token the server then refused for scopes they granted (a 403):
    after the second, another login is no longer suggested (the step-up retry limit)."""
    scope: str | None = None
    """The scopes the owner's next login asks for besides those the server names: what a
    request was refused for (403 ``insufficient_scope``) with what was granted before."""

    def storage(
        self, entry: ServerEntry, save: Callable[[OAuthGrant], Awaitable[bool]], clock: Callable[[], float]
    ) -> GrantStorage:
        """The grant, kept across connects (tokens refresh in place)."""
        if self.grant is None:
            grant = entry.oauth if entry.oauth is not None else OAuthGrant(resource=resource_of(entry.url))
            self.grant = GrantStorage(grant, save, clock=clock)
        return self.grant

    def held(self, entry: ServerEntry) -> OAuthGrant | None:
        """The grant held now, refreshed tokens included; None for a header server."""
        return self.grant.grant if self.grant is not None else entry.oauth

    def received(
        self, grant: OAuthGrant, save: Callable[[OAuthGrant], Awaitable[bool]], clock: Callable[[], float]
    ) -> None:
        """A login's grant with tokens becomes the server's (held in place when it holds one)."""
        if self.grant is None:
            self.grant = GrantStorage(grant, save, clock=clock)
        else:
            self.grant.grant = grant

    def use(self, storage: GrantStorage) -> None:
        """A login's storage becomes the server's (it got tokens, or it found none were needed)."""
        self.grant = storage

    def begin(self) -> anyio.CancelScope:
        """A new login replaces the one in flight: only the newest link works."""
        if self.flight is not None:
            self.flight.cancel()
        self.flight = anyio.CancelScope()
        return self.flight

    def ended(self, flight: anyio.CancelScope) -> None:
        if self.flight is flight:
            self.flight = None

    def supersede(self, grant: OAuthGrant | None) -> None:
        self.superseded = grant

    def abandon(self) -> OAuthGrant | None:
        """The superseded grant, now to be revoked (it is no longer held here)."""
        grant, self.superseded = self.superseded, None
        return grant

    def wants(self, scope: str | None) -> None:
        """A request was refused for ``scope`` (with what was granted before): the next login asks for it."""
        if scope:
            self.scope = scope

    def granted(self) -> None:
        """A login was done for the scope asked: the token's scope holds it now."""
        self.scope = None

    def counted(self, *, refused: bool) -> None:
        """A connect after a login ended: refused again (counted) or connected (the count restarts)."""
        self.refused = self.refused + 1 if refused else 0
