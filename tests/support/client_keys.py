"""A machine client's private key, made for a test, as the owner pastes it."""

from __future__ import annotations

from typing import Literal, NamedTuple

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

__all__ = ["ClientKey", "new_client_key"]


class ClientKey(NamedTuple):
    """A private key, its PKCS#8 PEM, and the lines of the PEM's base64 body (each of them a piece
    of the secret that must never show)."""

    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    pem: str
    lines: list[str]


def new_client_key(kind: Literal["ec", "rsa"] = "ec") -> ClientKey:
    """A new private key of ``kind``: P-256, or RSA of 2048 bits."""
    key = (
        ec.generate_private_key(ec.SECP256R1())
        if kind == "ec"
        else rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return ClientKey(key, pem, [line for line in pem.splitlines() if not line.startswith("-----")])
