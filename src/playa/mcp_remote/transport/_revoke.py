"""Token revocation (RFC 7009): what ``/mcp_remove`` does with a removed server's OAuth tokens.

The refresh token goes first: an authorization server that revokes it also ends the access
tokens of the same grant (RFC 7009 §2.1), and one that does not gets the access token next.
The client authenticates as at the token endpoint (the SDK's ``prepare_token_auth``). A
revocation is bounded in time and never blocks a removal: its outcome is only reported.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final, Literal

import anyio
import httpx2
from mcp.client.auth import OAuthTokenError
from mcp.client.auth.oauth2 import OAuthContext

from ..store import OAuthGrant
from ._oauth import GrantStorage, client_metadata

__all__ = ["REVOKE_TIMEOUT", "Revocation", "revoke"]

logger = logging.getLogger(__name__)

REVOKE_TIMEOUT: Final = 10.0
"""Seconds a removal waits for the authorization server to revoke its tokens."""


@dataclass(frozen=True, slots=True)
class Revocation:
    """How revoking a grant's tokens ended; ``why`` says what failed (safe to show: no token in it)."""

    outcome: Literal["revoked", "not offered", "failed", "nothing"]
    why: str = ""

    @property
    def text(self) -> str:
        """One sentence for the owner, or "" when there was nothing to revoke."""
        if self.outcome == "revoked":
            return "Its tokens were revoked at the authorization server."
        if self.outcome == "not offered":
            return "Its authorization server offers no revocation: its tokens stay valid until they expire."
        if self.outcome == "failed":
            return (
                f"Its tokens could not be revoked ({self.why}): they stay valid until they expire, "
                "or until you revoke Playa's access at the authorization server."
            )
        return ""


async def revoke(
    grant: OAuthGrant, http: httpx2.AsyncClient, *, timeout: float = REVOKE_TIMEOUT
) -> Revocation:
    """Revoke ``grant``'s refresh and access tokens where its authorization server offers it.

    ``http`` is a client under the host's egress policy; the caller closes it.
    """
    tokens, client, metadata = grant.tokens, grant.client, grant.metadata
    if tokens is None or client is None:
        return Revocation("nothing")
    if metadata is None or metadata.revocation_endpoint is None:
        return Revocation("not offered")
    endpoint = str(metadata.revocation_endpoint)
    # The SDK's own client authentication (none, client_secret_basic, client_secret_post).
    context = OAuthContext(
        grant.resource,
        client_metadata(_NO_REDIRECT),
        GrantStorage(grant, _keep),
        redirect_handler=None,
        callback_handler=None,
        client_info=client,
    )
    failure: Revocation | None = None
    with anyio.move_on_after(timeout):
        for token, hint in [(tokens.refresh_token, "refresh_token"), (tokens.access_token, "access_token")]:
            if not token:
                continue
            try:
                data, headers = context.prepare_token_auth(
                    {"token": token, "token_type_hint": hint, "client_id": client.client_id}, {}
                )
            except OAuthTokenError:
                return Revocation("failed", "the client's authentication method is not one Playa speaks")
            try:
                response = await http.post(endpoint, data=data, headers=headers)
            except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
                # Not the exception's text: it may quote the request.
                logger.info("revoking a token at %s failed: %s", endpoint, type(exc).__name__)
                return Revocation("failed", "the authorization server could not be reached")
            # RFC 7009 §2.2: 200 whether or not the token was valid. Anything else (a token type
            # it does not revoke, 503 for later): the other token is still worth a try.
            if response.status_code != 200:
                logger.info("revoking a token at %s failed: HTTP %s", endpoint, response.status_code)
                failure = failure or Revocation(
                    "failed", f"the authorization server answered HTTP {response.status_code}"
                )
        return failure or Revocation("revoked")
    return Revocation("failed", f"no answer within {timeout:g} s")


_NO_REDIRECT: Final = "http://127.0.0.1/oauth/callback"
"""Revocation redirects nobody; the SDK's context only needs a well-formed client description."""


async def _keep(grant: OAuthGrant) -> None:
    """Revocation stores nothing."""
