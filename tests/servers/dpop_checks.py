"""A test server's side of DPoP (RFC 9449): checking a proof, as a resource or authorization
server does, with PyJWT, a code path apart from the client's own signing.

``Proofs`` keeps what it saw: the ``jti``s (a replay is refused), how many proofs passed, and
how many nonce challenges it issued and saw honoured.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import jwt

__all__ = ["Proofs", "thumbprint"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def thumbprint(jwk: dict[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of an EC public JWK."""
    members = {name: jwk[name] for name in ("crv", "kty", "x", "y")}
    return _b64(hashlib.sha256(json.dumps(members, sort_keys=True, separators=(",", ":")).encode()).digest())


@dataclass
class Proofs:
    """One server's checks of the proofs it receives; with ``nonce``, it demands that nonce."""

    nonce: str | None = None
    jtis: set[str] = field(default_factory=set)
    passed: int = 0
    challenged: int = 0
    honoured: int = 0
    refusals: list[str] = field(default_factory=list)

    def check(
        self, proof: str | None, method: str, url: str, *, access_token: str | None = None
    ) -> tuple[str | None, bool]:
        """The proof key's thumbprint (None if the proof fails), and whether its nonce is wanting."""
        try:
            header = jwt.get_unverified_header(proof or "")
            if (
                header.get("typ") != "dpop+jwt"
                or header.get("alg") != "ES256"
                or "d" in header.get("jwk", {})
            ):
                raise ValueError("header")
            key = jwt.PyJWK(header["jwk"], algorithm="ES256")
            claims = jwt.decode(proof or "", key.key, algorithms=["ES256"], options={"verify_aud": False})
            if (
                claims.get("htm") != method
                or claims.get("htu") != url
                or abs(time.time() - claims["iat"]) > 300
            ):
                raise ValueError("htm, htu or iat")
            if access_token is not None and claims.get("ath") != _b64(
                hashlib.sha256(access_token.encode()).digest()
            ):
                raise ValueError("ath")
            if claims["jti"] in self.jtis:
                raise ValueError("a replayed jti")
        except (jwt.PyJWTError, ValueError, KeyError, TypeError) as exc:
            self.refusals.append(str(exc))
            return None, False
        self.jtis.add(claims["jti"])
        self.passed += 1
        if self.nonce is not None and claims.get("nonce") != self.nonce:
            self.challenged += 1
            return thumbprint(header["jwk"]), True
        if self.nonce is not None:
            self.honoured += 1
        return thumbprint(header["jwk"]), False
