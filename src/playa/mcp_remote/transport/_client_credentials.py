"""The client-credentials grant (OAuth 2.1 4.2, the MCP client-credentials extension): a machine
client's token, with no person's login.

The client authenticates with its secret (``client_secret_basic`` or ``_post``, the SDK's
``prepare_token_auth``) or with a JWT assertion signed by its private key (``private_key_jwt``,
RFC 7523 2.2, signed by the SDK's ``SignedJWTParameters``), whose audience is the authorization
server's issuer. The key is the owner's, given to ``/mcp_add --client-key`` and sealed with the
grant; it signs here and goes nowhere else.
"""

from __future__ import annotations

from typing import Final

import httpx2
from mcp.client.auth.extensions.client_credentials import SignedJWTParameters
from mcp.client.auth.oauth2 import OAuthContext

from ..store import CLIENT_CREDENTIALS, signing_algorithm

__all__ = ["ASSERTION_TYPE", "client_credentials_request"]

ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_ASSERTION_LIFETIME: Final = 120


async def client_credentials_request(
    context: OAuthContext, token_url: str, client_key: str | None
) -> tuple[httpx2.Request, str | None]:
    """The token request of the client-credentials grant, for the context's client and scope,
    and the assertion it carries (a credential for its short life), if it signs one."""
    client = context.client_info
    if client is None:  # pragma: no cover - a machine grant always holds its client
        raise ValueError("no client")
    data: dict[str, str] = {"grant_type": CLIENT_CREDENTIALS}
    assertion: str | None = None
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if client_key is not None:
        metadata = context.oauth_metadata
        # RFC 7523bis: the audience is the authorization server's issuer identifier.
        audience = str(metadata.issuer) if metadata is not None else token_url
        sign = SignedJWTParameters(
            issuer=client.client_id or "",
            subject=client.client_id or "",
            signing_key=client_key,
            signing_algorithm=signing_algorithm(client_key),
            lifetime_seconds=_ASSERTION_LIFETIME,
        ).create_assertion_provider()
        data["client_assertion"] = assertion = await sign(audience)
        data["client_assertion_type"] = ASSERTION_TYPE
    else:
        data, headers = context.prepare_token_auth(data, headers)
    if context.should_include_resource_param(context.protocol_version):
        data["resource"] = context.get_resource_url()
    if context.client_metadata.scope:
        data["scope"] = context.client_metadata.scope
    return httpx2.Request("POST", token_url, data=data, headers=headers), assertion
