"""Where a chat's OAuth credentials are held: the SDK's ``TokenStorage`` over the sealed grant,
and the outbound gate told of each credential the moment it is known."""

from __future__ import annotations

import time
import weakref
from collections.abc import Awaitable, Callable, Iterable

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ...core import outbound_secrets
from ..store import OAuthGrant

__all__ = ["GrantStorage", "register_secrets"]

Clock = Callable[[], float]


def register_secrets(values: Iterable[str | None]) -> None:
    """Tell the outbound gate (every log record) about credentials the moment they are known."""
    known = {value for value in values if value}
    if known:
        outbound_secrets().add(known)


class GrantStorage:
    """The SDK's ``TokenStorage`` for one server of one chat: the grant in the sealed entry.

    ``persist`` writes the grant (sealed) and is awaited before the SDK goes on, so a token the
    server accepted is never one the store lost.
    """

    def __init__(
        self,
        grant: OAuthGrant,
        persist: Callable[[OAuthGrant], Awaitable[object]],
        *,
        clock: Clock = time.time,
    ) -> None:
        self.grant = grant
        self._persist = persist
        self._clock = clock
        # The log gate holds the grant's credentials and the ones they replaced (a late record
        # may quote a token just refreshed away), no older ones: a bot refreshes for ever, and
        # each token kept would cost the gate its pieces for ever. Let go with this object.
        self._holder = object()
        outbound_secrets().hold(self._holder, grant.secrets)
        weakref.finalize(self, outbound_secrets().release_later, self._holder)
        self.dpop_bound = False
        """Whether the tokens stored next are DPoP-bound (the token response said so)."""

    def _hold(self, grant: OAuthGrant, *also: str) -> None:
        outbound_secrets().hold(self._holder, grant.secrets | self.grant.secrets | set(also))

    def update(self, grant: OAuthGrant, *also: str) -> None:
        """Hold ``grant`` (a new key, a client bound to its issuer) to be stored with the next tokens;
        ``also``: passing credentials (an assertion) the log gate holds until the grant changes."""
        self._hold(grant, *also)
        self.grant = grant

    async def get_tokens(self) -> OAuthToken | None:
        return self.grant.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        grant = self.grant.with_tokens(tokens, now=self._clock(), dpop_bound=self.dpop_bound)
        self._hold(grant)
        self.grant = grant
        await self._persist(self.grant)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.grant.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        grant = self.grant.with_client(client_info)
        self._hold(grant)
        self.grant = grant
        await self._persist(self.grant)
