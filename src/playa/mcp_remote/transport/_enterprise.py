"""Enterprise-managed authorization (SEP-990): the owner's ID token at their identity provider
becomes an ID-JAG (token exchange, RFC 8693), which the MCP server's authorization server takes
for an access token (the jwt-bearer grant, RFC 7523), as the SDK's ``identity_assertion``
extension does it.

The IdP leg runs inside the connection's auth flow, as requests the flow yields: it goes out
through the same client, the same egress rules, as every other OAuth request. The ID token
goes only to the token endpoint of the issuer the owner named, found in that issuer's own
metadata and on its origin. The ID-JAG is not kept: it lives minutes, names one authorization
server and one resource, and each new access token gets a fresh one (it is registered with the
outbound gate while it lives). What an IdP says when it refuses is never repeated but for an
RFC 6749 error code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Final
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    create_oauth_metadata_request,
    handle_auth_metadata_response,
)
from mcp.shared.auth import OAuthMetadata

from ..store import ENTERPRISE_GRANT, IdentityProvider, OAuthGrant
from ._oauth_codes import error_code

__all__ = ["ID_JAG", "EnterpriseRefused", "IdentityLeg", "identity_leg"]

TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG: Final = "urn:ietf:params:oauth:token-type:id-jag"
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}


class EnterpriseRefused(Exception):
    """The identity provider gave no ID-JAG; ``reason`` is Playa's words (and an OAuth code)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port or _DEFAULT_PORTS.get(parts.scheme)


@dataclass(eq=False, repr=False)
class IdentityLeg:
    """One ID-JAG from the IdP: its metadata, then the token exchange; then the request that
    presents the ID-JAG to the authorization server.

    ``first()`` is the first request; ``step(response)`` takes each answer and gives the next
    request, the last being the authorization server's token request (``done`` is then true).
    """

    idp: IdentityProvider
    _: KW_ONLY
    audience: str
    """The authorization server's issuer."""
    resource: str
    scope: str | None
    present: Callable[[str], httpx2.Request]
    """The token request that carries an ID-JAG."""
    known: Callable[[str], None]
    """Registers a new secret with the outbound gate."""
    done: bool = field(default=False, init=False)
    _urls: list[str] = field(init=False)
    _pending: httpx2.Request | None = field(default=None, init=False)
    _exchanging: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._urls = build_oauth_authorization_server_metadata_discovery_urls(
            self.idp.issuer, self.idp.issuer
        )

    def owns(self, request: httpx2.Request) -> bool:
        """Whether ``request`` is the leg's own (its answer goes to ``step``)."""
        return not self.done and request is self._pending

    def first(self) -> httpx2.Request:
        return self._next(create_oauth_metadata_request(self._urls.pop(0)))

    async def step(self, response: httpx2.Response) -> httpx2.Request:
        if not self._exchanging:
            ok, metadata = await handle_auth_metadata_response(response)
            if metadata is not None:
                return self._next(self._exchange(metadata))
            if ok and self._urls:
                return self._next(create_oauth_metadata_request(self._urls.pop(0)))
            raise EnterpriseRefused("the identity provider published no usable metadata")
        body = await response.aread()
        if response.status_code != 200:
            raise EnterpriseRefused("the identity provider refused the ID token" + error_code(body))
        jag = _id_jag(body)
        if jag is None:
            raise EnterpriseRefused("the identity provider answered the token exchange without an ID-JAG")
        self.known(jag)
        self.done = True
        return self.present(jag)

    def _next(self, request: httpx2.Request) -> httpx2.Request:
        self._pending = request
        return request

    def _exchange(self, metadata: OAuthMetadata) -> httpx2.Request:
        """The token exchange (RFC 8693 2.1, SEP-990 4.3), to the named issuer's endpoint only."""
        if str(metadata.issuer).rstrip("/") != self.idp.issuer.rstrip("/"):
            # RFC 8414 3.3: metadata for another issuer is not this IdP's.
            raise EnterpriseRefused("the identity provider's metadata names another issuer")
        endpoint = str(metadata.token_endpoint)
        if _origin(endpoint) != _origin(self.idp.issuer):
            raise EnterpriseRefused("the identity provider's token endpoint is not on its own origin")
        self._exchanging = True
        data = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "audience": self.audience,
            "resource": self.resource,
            "subject_token": self.idp.id_token,
            "subject_token_type": ID_TOKEN_TYPE,
        }
        if self.idp.client_id is not None:
            data["client_id"] = self.idp.client_id
        if self.scope:
            data["scope"] = self.scope
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        return httpx2.Request("POST", endpoint, data=data, headers=headers)


def _id_jag(body: bytes) -> str | None:
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("issued_token_type") != ID_JAG:
        return None
    token = answer.get("access_token")
    return token if isinstance(token, str) and token and len(token) <= 16_384 else None


def identity_leg(
    context: OAuthContext,
    grant: OAuthGrant,
    token_endpoint: str,
    *,
    prove: Callable[[httpx2.Request], httpx2.Request],
    known: Callable[[str], None],
) -> IdentityLeg:
    """The leg of a connect's auth flow that gets an access token for an enterprise grant: the
    ID-JAG's audience is the issuer of the authorization server the client is bound to."""
    if grant.idp is None:  # pragma: no cover - an enterprise grant holds its IdP
        raise ValueError("no identity provider")
    metadata = context.oauth_metadata
    # RFC 7523bis: the audience is the authorization server's issuer identifier.
    audience = str(metadata.issuer) if metadata is not None else context.auth_server_url or token_endpoint
    resource, scope = context.get_resource_url(), context.client_metadata.scope

    def present(assertion: str) -> httpx2.Request:
        """The jwt-bearer grant (RFC 7523 2.1) with the ID-JAG, and the client's secret."""
        data = {"grant_type": ENTERPRISE_GRANT, "assertion": assertion, "resource": resource}
        if scope:
            data["scope"] = scope
        data, headers = context.prepare_token_auth(
            data, {"Content-Type": "application/x-www-form-urlencoded"}
        )
        return prove(httpx2.Request("POST", token_endpoint, data=data, headers=headers))

    return IdentityLeg(
        grant.idp, audience=audience, resource=resource, scope=scope, present=present, known=known
    )
