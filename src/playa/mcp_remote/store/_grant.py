"""What a chat holds of one server's OAuth authorization: sealed in the entry, never shown.

An ``OAuthGrant`` is the client registration (pre-registered or dynamic), the tokens, the
issuer that granted them and the resource they were granted for. The store seals it with the
entry's headers under the key ``:oauth``, which can never be a header name (an HTTP token has
no ``:``); the seal's associated data binds the entry's scope and URL, and opening checks that
the sealed resource is that URL's, so a grant copied onto another entry does not open.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Final

import pydantic
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken
from mcp.shared.auth_utils import resource_url_from_server_url

from ...exceptions import ValidationError

__all__ = ["GRANT_VERSION", "OAuthGrant", "resource_of"]

GRANT_VERSION: Final = 1
_FIELDS: Final = frozenset({"v", "resource", "issuer", "client", "tokens", "expires_at", "metadata"})


def resource_of(url: str) -> str:
    """The canonical resource URI of a server URL (RFC 8707): what its tokens are bound to."""
    return resource_url_from_server_url(url)


@dataclass(frozen=True, repr=False)
class OAuthGrant:
    """One server's OAuth state. Every value but ``resource`` and ``issuer`` may be a credential."""

    resource: str
    issuer: str | None = None
    client: OAuthClientInformationFull | None = None
    tokens: OAuthToken | None = None
    expires_at: float | None = None
    """When the access token expires (Unix time), if the authorization server said."""
    metadata: OAuthMetadata | None = None
    """The authorization server's metadata as discovered at the login (public): its token
    endpoint is where a refresh goes before any request has been refused."""

    @property
    def secrets(self) -> frozenset[str]:
        """Every credential in the grant: the tokens and the client secret."""
        values: set[str] = set()
        if self.tokens is not None:
            values.add(self.tokens.access_token)
            if self.tokens.refresh_token:
                values.add(self.tokens.refresh_token)
        if self.client is not None and self.client.client_secret:
            values.add(self.client.client_secret)
        return frozenset(v for v in values if v)

    @property
    def authorized(self) -> bool:
        """Whether the grant holds tokens (they may have expired)."""
        return self.tokens is not None

    def with_tokens(self, tokens: OAuthToken | None, *, now: float) -> OAuthGrant:
        expires_at = None
        if tokens is not None and tokens.expires_in is not None:
            expires_at = now + int(tokens.expires_in)
        return replace(self, tokens=tokens, expires_at=expires_at)

    def with_client(self, client: OAuthClientInformationFull | None) -> OAuthGrant:
        issuer = client.issuer if client is not None and client.issuer else self.issuer
        return replace(self, client=client, issuer=issuer)

    def __repr__(self) -> str:
        return (
            f"OAuthGrant(resource={self.resource!r}, issuer={self.issuer!r}, "
            f"client={'yes' if self.client else 'no'}, tokens={'yes' if self.tokens else 'no'})"
        )

    def encode(self) -> str:
        """The grant as one JSON text, to be sealed."""
        return json.dumps(
            {
                "v": GRANT_VERSION,
                "resource": self.resource,
                "issuer": self.issuer,
                "client": None
                if self.client is None
                else self.client.model_dump(mode="json", exclude_none=True),
                "tokens": None
                if self.tokens is None
                else self.tokens.model_dump(mode="json", exclude_none=True),
                "expires_at": self.expires_at,
                "metadata": None
                if self.metadata is None
                else self.metadata.model_dump(mode="json", exclude_none=True),
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str) -> OAuthGrant:
        """Read a sealed grant; raises ``ValidationError`` (field ``oauth``) without quoting it."""
        try:
            raw = json.loads(text)
        except ValueError:
            raise ValidationError("oauth", "the sealed authorization is not JSON") from None
        if not isinstance(raw, dict) or set(raw) != _FIELDS or raw["v"] != GRANT_VERSION:
            raise ValidationError("oauth", "the sealed authorization has an unknown format")
        resource, issuer, expires_at = raw["resource"], raw["issuer"], raw["expires_at"]
        if not isinstance(resource, str) or not (issuer is None or isinstance(issuer, str)):
            raise ValidationError("oauth", "the sealed authorization has an unknown format")
        if expires_at is not None and (
            not isinstance(expires_at, int | float)
            or isinstance(expires_at, bool)
            or not math.isfinite(expires_at)
        ):
            raise ValidationError("oauth", "the sealed authorization has an unknown format")
        try:
            client = (
                None if raw["client"] is None else OAuthClientInformationFull.model_validate(raw["client"])
            )
            tokens = None if raw["tokens"] is None else OAuthToken.model_validate(raw["tokens"])
            metadata = None if raw["metadata"] is None else OAuthMetadata.model_validate(raw["metadata"])
        except pydantic.ValidationError:
            # Not chained: pydantic's message quotes the input, which holds the tokens.
            raise ValidationError("oauth", "the sealed authorization has an unknown format") from None
        return cls(
            resource, issuer, client, tokens, None if expires_at is None else float(expires_at), metadata
        )
