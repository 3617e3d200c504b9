"""The enterprise identity provider of an ``/mcp_add … --grant enterprise`` client (SEP-990).

The owner names their IdP's issuer, the client id Playa has there (if the IdP wants one) and the
owner's ID token from it. The ID token is a credential of the owner's identity, not only of one
server: it is sealed with the grant, registered with the outbound gate, and sent only to the
token endpoint that the IdP's own metadata names, on the IdP's origin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["ENTERPRISE_GRANT", "IdentityProvider"]

ENTERPRISE_GRANT: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
"""The grant a client of enterprise-managed authorization is registered for (RFC 7523)."""


@dataclass(frozen=True, repr=False)
class IdentityProvider:
    """Where the owner's ID token comes from, and the token itself."""

    issuer: str
    id_token: str
    client_id: str | None = None

    def __repr__(self) -> str:
        return f"IdentityProvider(issuer={self.issuer!r}, client_id={'yes' if self.client_id else 'no'})"

    def encode(self) -> dict[str, str]:
        value = {"issuer": self.issuer, "id_token": self.id_token}
        if self.client_id is not None:
            value["client_id"] = self.client_id
        return value

    @classmethod
    def decode(cls, raw: object) -> IdentityProvider | None:
        """The sealed value, or None if it is not one (the caller says the format is unknown)."""
        if not isinstance(raw, dict) or not {"issuer", "id_token"} <= set(raw) <= {
            "issuer",
            "id_token",
            "client_id",
        }:
            return None
        issuer, id_token, client_id = raw["issuer"], raw["id_token"], raw.get("client_id")
        if (
            not isinstance(issuer, str)
            or not isinstance(id_token, str)
            or not isinstance(client_id, str | None)
        ):
            return None
        return cls(issuer, id_token, client_id)
