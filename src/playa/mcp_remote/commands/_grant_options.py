"""``/mcp_add``'s grants without a person's login and their rules: a machine client
(``--grant client-credentials``) and enterprise-managed authorization (``--grant enterprise``,
SEP-990, with ``--idp``, ``--idp-client-id``, ``--id-token``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from ...exceptions import ValidationError
from ..store import IdentityProvider
from ._option_values import client_id_of, secret_option

__all__ = ["ENTERPRISE_FLAGS", "EnterpriseRequest", "check_grant", "check_id_token"]

ENTERPRISE_FLAGS: Final = ("--idp", "--idp-client-id", "--id-token")
_MAX_ID_TOKEN: Final = 16_384
_LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")


@dataclass(slots=True, repr=False)
class EnterpriseRequest:
    """What ``--grant enterprise`` takes besides the client: the IdP, and the owner's ID token
    there (``ask_id_token``: to be asked in secret)."""

    idp: str | None = None
    client_id: str | None = None
    id_token: str | None = None
    ask_id_token: bool = False
    granted: bool = False
    """Whether ``--grant enterprise`` was given."""

    def __repr__(self) -> str:
        token = "to ask" if self.ask_id_token else "given" if self.id_token else "none"
        return f"EnterpriseRequest(idp={self.idp!r}, id_token={token})"

    def apply(self, flag: str, value: str | None) -> None:
        if flag == "--idp":
            self.idp = _issuer(value)
        elif flag == "--idp-client-id":
            self.client_id = client_id_of(
                value, "--idp-client-id takes Playa's client id at the IdP (no spaces)"
            )
        else:
            taken = self.id_token is not None or self.ask_id_token
            self.id_token, self.ask_id_token = secret_option("--id-token", taken, value, check_id_token)

    @property
    def used(self) -> bool:
        """Whether an option of the enterprise grant was given."""
        return (
            self.idp is not None
            or self.client_id is not None
            or self.id_token is not None
            or self.ask_id_token
        )

    def check(self, *, client_id: str | None, has_secret: bool) -> None:
        """The rules of ``--grant enterprise``: a confidential client, an IdP and an ID token."""
        if self.used and not self.granted:
            raise ValidationError("oauth", "--idp, --idp-client-id and --id-token go with --grant enterprise")
        if self.granted and (
            client_id is None
            or not has_secret
            or self.idp is None
            or not (self.id_token or self.ask_id_token)
        ):
            raise ValidationError(
                "oauth",
                "--grant enterprise takes --client-id, --client-secret, --idp <issuer-url> and --id-token",
            )

    def provider(self) -> IdentityProvider | None:
        if self.idp is None or self.id_token is None:
            return None
        return IdentityProvider(self.idp, self.id_token, self.client_id)


def _issuer(value: str | None) -> str:
    """An IdP's issuer identifier: https (http only on loopback), no query or fragment."""
    try:
        parts = urlsplit(value or "")
        secure = parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK)
    except ValueError:
        secure = False
    if not value or not secure or not parts.hostname or parts.query or parts.fragment or "@" in parts.netloc:
        raise ValidationError("oauth", "--idp takes the identity provider's issuer, an https:// URL")
    return value


def check_id_token(value: str) -> str:
    """An ID token as sent: a JWT (three base64url parts). Never quoted back."""
    token = value.strip()
    parts = token.split(".")
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    if len(token) > _MAX_ID_TOKEN or len(parts) != 3 or not all(p and set(p) <= alphabet for p in parts):
        raise ValidationError("oauth", "the ID token is not a JWT (three base64url parts joined by dots)")
    return token


def check_grant(
    enterprise: EnterpriseRequest | None,
    *,
    machine: bool,
    client_id: str | None,
    has_secret: bool,
    has_key: bool,
) -> None:
    """A machine client (``--grant client-credentials``) has an id and one credential, a secret or
    a key; an enterprise one (``--grant enterprise``) an id, a secret, an IdP and an ID token."""
    if enterprise is not None:
        enterprise.check(client_id=client_id, has_secret=has_secret and not has_key)
    if has_key and not machine:
        raise ValidationError(
            "oauth", "--client-key signs a machine client's requests: add --grant client-credentials"
        )
    if machine and (client_id is None or has_secret == has_key):
        raise ValidationError(
            "oauth",
            "--grant client-credentials takes --client-id with either --client-secret or --client-key",
        )
