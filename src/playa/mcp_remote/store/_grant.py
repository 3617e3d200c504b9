"""What a chat holds of one server's OAuth authorization: sealed in the entry, never shown.

An ``OAuthGrant`` is the client registration (pre-registered, metadata document or dynamic),
the tokens, the issuer that granted them and the resource they were granted for; with DPoP,
the private key the tokens are bound to; for a machine client (the client-credentials grant
with ``private_key_jwt``), the owner's private key that signs its assertions. The store seals it with the
entry's headers under the key ``:oauth``, which can never be a header name (an HTTP token has
no ``:``); the seal's associated data binds the entry's scope and URL, and opening checks that
the sealed resource is that URL's, so a grant copied onto another entry does not open.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Final

import pydantic
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from mcp.client.auth.utils import issuers_match
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken
from mcp.shared.auth_utils import resource_url_from_server_url

from ...core import MIN_SECRET_LENGTH
from ...exceptions import ValidationError
from ._identity_provider import ENTERPRISE_GRANT, IdentityProvider

__all__ = [
    "CLIENT_CREDENTIALS",
    "GRANT_VERSION",
    "OAuthGrant",
    "client_key_pem",
    "resource_of",
    "signing_algorithm",
]

GRANT_VERSION: Final = 2
_FIELDS_V1: Final = frozenset({"v", "resource", "issuer", "client", "tokens", "expires_at", "metadata"})
_FIELDS_V2_FIRST: Final = _FIELDS_V1 | {"dpop_key", "dpop_bound", "client_key"}
_FIELDS: Final = _FIELDS_V2_FIRST | {"elsewhere"}
_MAX_ELSEWHERE: Final = 8
CLIENT_CREDENTIALS: Final = "client_credentials"
_CURVES: Final = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
_PEM = re.compile(r"-----BEGIN ([A-Z ]{1,40})-----(.*?)-----END \1-----", re.DOTALL)
_MAX_KEY: Final = 16_384


def client_key_pem(text: str) -> str:
    """A private key as the owner sent it, as PEM: whole, or on one line (its line breaks left out
    or turned into spaces, as a console line or ``tr -d '\\n' < key.pem`` gives it).

    Raises ``ValueError``, never quoting it, when it is no unencrypted private key that signs.
    """
    match = _PEM.search(text.strip()) if len(text) <= _MAX_KEY else None
    if match is None:
        raise ValueError("not a PEM private key (-----BEGIN PRIVATE KEY----- … -----END PRIVATE KEY-----)")
    label, body = match.group(1), "".join(match.group(2).split())
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    pem = "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----", ""])
    signing_algorithm(pem)
    return pem


def signing_algorithm(pem: str) -> str:
    """The JWS algorithm a PEM private key signs with; ``ValueError`` (never quoting it) if none."""
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        # TypeError: a key protected by a passphrase, which the host cannot type in.
        raise ValueError("not an unencrypted PEM private key") from None
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _CURVES:
        return _CURVES[key.curve.name]
    if isinstance(key, rsa.RSAPrivateKey):
        if key.key_size < 2048:
            raise ValueError("an RSA key shorter than 2048 bits")
        return "RS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    raise ValueError("a key of a kind the host does not sign with (EC P-256/384/521, RSA or Ed25519)")


def _same_issuer(a: str | None, b: str | None) -> bool:
    """Whether two issuer identifiers name one server (RFC 8414 3.3: as strings; a root issuer
    with and without its trailing slash alike, as the SDK compares them)."""
    return a is not None and b is not None and issuers_match(a, b)


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
    dpop_key: str | None = None
    """The private scalar of the DPoP key this grant's token requests prove (base64url)."""
    dpop_bound: bool = False
    """Whether the tokens are DPoP-bound (the authorization server said ``token_type`` DPoP)."""
    client_key: str | None = None
    """A machine client's private key (PEM), which signs its ``private_key_jwt`` assertions."""
    elsewhere: tuple[OAuthClientInformationFull, ...] = ()
    """The client's registrations with other authorization servers, each bound to its issuer
    (SEP-2352): a server that moves back to one uses it again instead of registering anew."""
    idp: IdentityProvider | None = None
    """Enterprise-managed authorization (SEP-990): the owner's identity provider and ID token."""

    @property
    def secrets(self) -> frozenset[str]:
        """Every credential in the grant: the tokens, the client secret, and its private keys
        (a PEM key also line by line: a record may quote one line of it)."""
        values: set[str] = set()
        if self.tokens is not None:
            values.add(self.tokens.access_token)
            if self.tokens.refresh_token:
                values.add(self.tokens.refresh_token)
        for client in (self.client, *self.elsewhere):
            if client is not None and client.client_secret:
                values.add(client.client_secret)
        if self.dpop_key:
            values.add(self.dpop_key)
        if self.idp is not None:
            values.add(self.idp.id_token)
        if self.client_key:
            values.add(self.client_key.strip())
            # Its lines too, but a short last line is no secret of its own (the whole key is).
            lines = (line.strip() for line in self.client_key.splitlines() if not line.startswith("-----"))
            values.update(line for line in lines if len(line) >= MIN_SECRET_LENGTH)
        return frozenset(v for v in values if v)

    @property
    def machine(self) -> bool:
        """Whether the client gets its tokens with no person's login: by the client-credentials
        grant (``/mcp_add … --grant client-credentials``), or by the owner's ID token at their
        identity provider (``--grant enterprise``)."""
        if self.client is None:
            return False
        return self.client.grant_types == [CLIENT_CREDENTIALS] or self.enterprise

    @property
    def enterprise(self) -> bool:
        """Whether the tokens come by enterprise-managed authorization (an ID-JAG from the IdP)."""
        return (
            self.idp is not None and self.client is not None and self.client.grant_types == [ENTERPRISE_GRANT]
        )

    @property
    def authorized(self) -> bool:
        """Whether the grant holds tokens (they may have expired)."""
        return self.tokens is not None

    def with_tokens(self, tokens: OAuthToken | None, *, now: float, dpop_bound: bool = False) -> OAuthGrant:
        expires_at = None
        if tokens is not None and tokens.expires_in is not None:
            expires_at = now + int(tokens.expires_in)
        return replace(
            self, tokens=tokens, expires_at=expires_at, dpop_bound=tokens is not None and dpop_bound
        )

    def with_client(self, client: OAuthClientInformationFull | None) -> OAuthGrant:
        """The grant with ``client`` as its registration; the one it replaces, if it was bound to
        another issuer, is kept for that issuer (credentials are kept per issuer, SEP-2352)."""
        issuer = client.issuer if client is not None and client.issuer else self.issuer
        kept = [c for c in self.elsewhere if client is None or not _same_issuer(c.issuer, client.issuer)]
        previous = self.client
        if (
            previous is not None
            and previous.issuer
            and client is not None
            and client.issuer
            and not _same_issuer(previous.issuer, client.issuer)
        ):
            kept = [c for c in kept if not _same_issuer(c.issuer, previous.issuer)] + [previous]
        return replace(self, client=client, issuer=issuer, elsewhere=tuple(kept[-_MAX_ELSEWHERE:]))

    def client_for(self, issuer: str) -> OAuthClientInformationFull | None:
        """The registration bound to ``issuer``, if the grant holds one."""
        for client in (self.client, *self.elsewhere):
            if client is not None and client.issuer and _same_issuer(client.issuer, issuer):
                return client
        return None

    def __repr__(self) -> str:
        return (
            f"OAuthGrant(resource={self.resource!r}, issuer={self.issuer!r}, "
            f"client={'yes' if self.client else 'no'}, tokens={'yes' if self.tokens else 'no'}, "
            f"dpop={'yes' if self.dpop_key else 'no'}, client_key={'yes' if self.client_key else 'no'})"
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
                "dpop_key": self.dpop_key,
                "dpop_bound": self.dpop_bound,
                "client_key": self.client_key,
                "elsewhere": [c.model_dump(mode="json", exclude_none=True) for c in self.elsewhere],
            }
            | ({} if self.idp is None else {"idp": self.idp.encode()}),
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
        known = {(1, _FIELDS_V1), (2, _FIELDS_V2_FIRST), (2, _FIELDS), (2, _FIELDS | {"idp"})}
        if not isinstance(raw, dict) or (raw.get("v"), frozenset(raw)) not in known:
            # Older grants (before DPoP, machine clients, other issuers' registrations) still
            # open: their new fields are unset.
            raise ValidationError("oauth", "the sealed authorization has an unknown format")
        resource, issuer, expires_at = raw["resource"], raw["issuer"], raw["expires_at"]
        dpop_key, dpop_bound, client_key = (
            raw.get("dpop_key"),
            raw.get("dpop_bound", False),
            raw.get("client_key"),
        )
        if (
            not isinstance(resource, str)
            or not all(value is None or isinstance(value, str) for value in (issuer, dpop_key, client_key))
            or not isinstance(dpop_bound, bool)
        ):
            raise ValidationError("oauth", "the sealed authorization has an unknown format")
        if expires_at is not None and (
            not isinstance(expires_at, int | float)
            or isinstance(expires_at, bool)
            or not math.isfinite(expires_at)
        ):
            raise ValidationError("oauth", "the sealed authorization has an unknown format")
        idp = None if "idp" not in raw else IdentityProvider.decode(raw["idp"])
        if "idp" in raw and idp is None:
            raise ValidationError("oauth", "the sealed authorization has an unknown format")
        try:
            client = (
                None if raw["client"] is None else OAuthClientInformationFull.model_validate(raw["client"])
            )
            tokens = None if raw["tokens"] is None else OAuthToken.model_validate(raw["tokens"])
            metadata = None if raw["metadata"] is None else OAuthMetadata.model_validate(raw["metadata"])
            elsewhere = raw.get("elsewhere", [])
            if not isinstance(elsewhere, list) or len(elsewhere) > _MAX_ELSEWHERE:
                raise ValidationError("oauth", "the sealed authorization has an unknown format")
            others = tuple(OAuthClientInformationFull.model_validate(c) for c in elsewhere)
        except pydantic.ValidationError:
            # Not chained: pydantic's message quotes the input, which holds the tokens.
            raise ValidationError("oauth", "the sealed authorization has an unknown format") from None
        return cls(
            resource,
            issuer,
            client,
            tokens,
            None if expires_at is None else float(expires_at),
            metadata,
            dpop_key,
            dpop_bound,
            client_key,
            others,
            idp,
        )
