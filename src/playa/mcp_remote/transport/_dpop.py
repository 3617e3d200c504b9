"""DPoP (RFC 9449, the MCP DPoP extension): proofs that a token's sender holds its grant's key.

A grant that an authorization server bound to a key (it advertises ES256 among its
``dpop_signing_alg_values_supported``) carries that key's private scalar, sealed with the
grant like its tokens. Each token request and each request to the server then carries a fresh
proof: a JWT signed with the key, naming the method and the URL (without its query), and, with
an access token, that token's hash (``ath``). A stolen DPoP-bound token is useless without the
key, which never leaves the host's memory and the sealed entry.

A server may insist on a nonce of its own in the proofs (``use_dpop_nonce``): the answer that
asks for one carries it (``DPoP-Nonce``), and the request is sent once more with a new proof
that holds it. Nonces are kept per origin (the authorization server's and the resource's differ).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import httpx2
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from mcp.client.auth.utils import extract_field_from_www_auth, issuers_match

__all__ = [
    "DPOP_ALGORITHM",
    "DPoPKey",
    "DPoPProofs",
    "access_token_hash",
    "dpop_offered",
    "nonce_of",
    "proof_target",
]

DPOP_ALGORITHM: Final = "ES256"
"""The one proof algorithm Playa signs with: ECDSA on P-256, which RFC 9449 names first."""
_MAX_NONCE: Final = 512
# A nonce is the server's text, put into every proof after it: printable ASCII, bounded.
_NONCE = re.compile(rf"[\x21-\x7e]{{1,{_MAX_NONCE}}}")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def access_token_hash(token: str) -> str:
    """The ``ath`` claim: the base64url SHA-256 of the access token (RFC 9449 4.2)."""
    return _b64url(hashlib.sha256(token.encode("ascii")).digest())


def proof_target(url: str) -> str:
    """The ``htu`` of a request to ``url``: without its query and fragment (RFC 9449 4.2)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def dpop_offered(algorithms: list[str] | None) -> bool:
    """Whether an authorization server that lists ``algorithms`` takes Playa's DPoP proofs."""
    return algorithms is not None and DPOP_ALGORITHM in algorithms


def nonce_of(value: str | None) -> str | None:
    """A server's ``DPoP-Nonce`` header value, if it is one Playa will put into its proofs."""
    if value is None or not _NONCE.fullmatch(value):
        return None
    return value


class DPoPKey:
    """One grant's DPoP key. ``secret`` is its private scalar, a credential sealed with the grant."""

    def __init__(
        self, private: ec.EllipticCurvePrivateKey, *, clock: Callable[[], float] = time.time
    ) -> None:
        if not isinstance(private.curve, ec.SECP256R1):
            raise ValueError("a DPoP key is a P-256 key")
        self._private = private
        self._clock = clock
        numbers = private.public_key().public_numbers()
        self.jwk: Final = {
            "crv": "P-256",
            "kty": "EC",
            "x": _b64url(numbers.x.to_bytes(32, "big")),
            "y": _b64url(numbers.y.to_bytes(32, "big")),
        }
        """The public key, as the proofs carry it."""

    @classmethod
    def generate(cls, *, clock: Callable[[], float] = time.time) -> DPoPKey:
        return cls(ec.generate_private_key(ec.SECP256R1()), clock=clock)

    @classmethod
    def from_secret(cls, secret: str, *, clock: Callable[[], float] = time.time) -> DPoPKey:
        """The key whose private scalar ``secret`` is; raises ``ValueError`` without quoting it."""
        try:
            raw = _unb64url(secret)
            if len(raw) != 32 or _b64url(raw) != secret:
                raise ValueError("not canonical")
            return cls(ec.derive_private_key(int.from_bytes(raw, "big"), ec.SECP256R1()), clock=clock)
        except (ValueError, UnsupportedAlgorithm):
            raise ValueError("not a DPoP key") from None

    @property
    def secret(self) -> str:
        """The private scalar, base64url: what the sealed grant keeps."""
        return _b64url(self._private.private_numbers().private_value.to_bytes(32, "big"))

    @property
    def thumbprint(self) -> str:
        """The key's JWK SHA-256 thumbprint (RFC 7638): what a bound token's ``cnf.jkt`` names."""
        canonical = json.dumps(self.jwk, sort_keys=True, separators=(",", ":")).encode()
        return _b64url(hashlib.sha256(canonical).digest())

    def __repr__(self) -> str:
        return f"DPoPKey(thumbprint={self.thumbprint!r})"

    def proof(
        self, method: str, url: str, *, access_token: str | None = None, nonce: str | None = None
    ) -> str:
        """A fresh proof for one request (a new ``jti`` each time: a server refuses a replay)."""
        header = {"alg": DPOP_ALGORITHM, "jwk": self.jwk, "typ": "dpop+jwt"}
        claims: dict[str, object] = {
            "htm": method.upper(),
            "htu": proof_target(url),
            "iat": int(self._clock()),
            "jti": secrets.token_urlsafe(18),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        if nonce is not None:
            claims["nonce"] = nonce
        signing_input = ".".join(
            _b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)
        )
        der = self._private.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class DPoPProofs:
    """One auth provider's DPoP: its grant's key (made at the first token request that wants
    one), the nonces servers asked for, and the proofs on requests."""

    def __init__(self, secret: str | None, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.key = DPoPKey.from_secret(secret, clock=clock) if secret else None
        self._nonces: dict[str, str] = {}
        self._offering: set[str] = set()
        self._resource_takes = False

    def wanted(self, issuer: str | None) -> bool:
        """Whether to bind the tokens of the authorization server ``issuer``: it said (in the
        metadata this flow discovered) that it takes Playa's proofs, and the server takes DPoP
        tokens (its challenge is ``DPoP``, or its resource metadata lists the algorithm). A server
        that knows only Bearer would refuse a bound token, so its tokens stay bearer tokens.
        The SDK's metadata models drop these fields, so they are read here."""
        return (
            self._resource_takes
            and issuer is not None
            and any(issuers_match(issuer, known) for known in self._offering)
        )

    async def saw(self, outgoing: httpx2.Request, response: httpx2.Response, *, resource: bool) -> None:
        """Note what a response says of DPoP: ``resource``'s challenge, or metadata that offers it."""
        if resource and response.status_code == 401:
            words = response.headers.get("WWW-Authenticate", "").split(None, 1)
            self._resource_takes |= bool(words) and words[0].rstrip(",").lower() == "dpop"
        if (
            outgoing.method != "GET"
            or response.status_code != 200
            or "/.well-known/" not in outgoing.url.path
        ):
            return
        try:
            body = json.loads(await response.aread())
        except ValueError:
            return
        if not isinstance(body, dict) or not isinstance(
            algorithms := body.get("dpop_signing_alg_values_supported"), list
        ):
            return
        if not dpop_offered([str(a) for a in algorithms]):
            return
        if isinstance(issuer := body.get("issuer"), str) and "token_endpoint" in body:
            self._offering.add(issuer)
        elif "authorization_servers" in body:
            self._resource_takes = True  # the resource's own metadata (RFC 9449 5.2)

    def ensure_key(self) -> str | None:
        """Make the grant's key if it has none: its secret, to be sealed with the grant; else None."""
        if self.key is not None:
            return None
        self.key = DPoPKey.generate(clock=self._clock)
        return self.key.secret

    def prove(self, request: httpx2.Request) -> None:
        """Put a fresh proof on ``request``: bound to its DPoP token, if it carries one."""
        if self.key is None:
            return
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        url = str(request.url)
        request.headers["DPoP"] = self.key.proof(
            request.method,
            url,
            access_token=token if scheme == "DPoP" else None,
            nonce=self._nonces.get(_origin(url)),
        )

    async def nonce_asked(self, outgoing: httpx2.Request, response: httpx2.Response) -> bool:
        """Keep a nonce the server sent for proofs; whether it refused ``outgoing`` for want of one:
        a token endpoint's 400 ``use_dpop_nonce`` (RFC 9449 8), a resource's 401 (9)."""
        if "DPoP" not in outgoing.headers or (nonce := nonce_of(response.headers.get("DPoP-Nonce"))) is None:
            return False
        self._nonces[_origin(str(outgoing.url))] = nonce
        if response.status_code == 401:
            return extract_field_from_www_auth(response, "error") == "use_dpop_nonce"
        if response.status_code != 400:
            return False
        try:
            return bool(json.loads(await response.aread()).get("error") == "use_dpop_nonce")
        except (ValueError, AttributeError):
            return False

    async def token_response(self, response: httpx2.Response) -> tuple[httpx2.Response, bool]:
        """A token response as the SDK's model reads it, and whether its token is DPoP-bound.

        The SDK's ``OAuthToken`` takes only ``Bearer``: a bound token's type (``DPoP``) is
        noted here, for the grant, and the SDK reads the rest as it is.
        """
        if response.status_code != 200 or self.key is None:
            return response, False
        try:
            body = json.loads(await response.aread())
        except ValueError:
            return response, False
        if not isinstance(body, dict) or str(body.get("token_type", "")).lower() != "dpop":
            return response, False
        return httpx2.Response(200, json={**body, "token_type": "Bearer"}, request=response.request), True
