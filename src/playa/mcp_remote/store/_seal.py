"""Seals that make a stored server entry tamper-evident and keep its header values secret.

A seal is AES-256-GCM over a header map. Its associated data is a canonical encoding of the
seal format version, the key id and a caller-supplied *context* (for the server store: the
chat's scope and every visible field of the entry). Opening a seal therefore proves that the
header map *and* the context are exactly what the holder of the host secret sealed together:
an entry that was edited, renamed, redirected or copied into another chat does not open.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping, Sequence
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Final, TypeAlias, TypedDict

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ...exceptions import ConfigError, StoreError

__all__ = [
    "MIN_SECRET_BYTES",
    "SEAL_VERSION",
    "Envelope",
    "JSONValue",
    "MalformedSeal",
    "SealBroken",
    "SealError",
    "Sealer",
    "UnknownSealVersion",
    "WrongKey",
    "canonical_json",
    "derive_key",
]

SEAL_VERSION: Final = 1
MIN_SECRET_BYTES: Final = 16

# Purpose and version live in the HKDF info, so a key derived here is useless for anything
# else the same host secret protects (and a v2 format gets a key of its own).
_KEY_INFO: Final = b"playa/mcp-remote/servers/v1"
_KEY_ID_INFO: Final = b"playa/mcp-remote/servers/v1/key-id"
_KEY_ID_BYTES: Final = 8
_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16
_KEY_ID_RE: Final = re.compile(r"[0-9a-f]{16}")
_ENVELOPE_FIELDS: Final = frozenset({"v", "kid", "nonce", "ct"})

JSONValue: TypeAlias = "bool | int | str | Sequence[JSONValue] | Mapping[str, JSONValue] | None"


class Envelope(TypedDict):
    """A seal as stored: format version, key id, nonce and ciphertext (base64)."""

    v: int
    kid: str
    nonce: str
    ct: str


class SealError(StoreError):
    """A seal did not open. ``reason`` is short, holds no secret, and is meant for the owner."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MalformedSeal(SealError):
    """The seal is missing, has the wrong shape, or its base64 is not canonical."""


class UnknownSealVersion(SealError):
    """The seal was written in a format this version of Playa does not know."""


class WrongKey(SealError):
    """The seal was made with a key derived from another host secret."""


class SealBroken(SealError):
    """Authentication failed: the entry or its seal was edited, moved or forged."""


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# ``json.dumps`` with these options (sorted keys, no spaces, ASCII only, no NaN) builds this
# encoder anew at every call, which is half of the cost of a small record's encoding; made once
# here. Without the circular-reference check: what is encoded is a tree of plain values.
_CANONICAL: Final = c_make_encoder(
    None, _not_json, encode_basestring_ascii, None, ":", ",", True, False, False
)


def canonical_json(value: JSONValue) -> bytes:
    """Encode ``value`` as one unambiguous byte string (sorted keys, no spaces, ASCII only)."""
    # A delimiter join ("a|b") would let "a|" + "b" collide with "a" + "|b"; JSON escapes
    # every string, so distinct values always encode differently.
    return "".join(_CANONICAL(value, 0)).encode("ascii")


def derive_key(secret: bytes, info: bytes, length: int = 32) -> bytes:
    """A key for one purpose, derived from the host secret with HKDF-SHA256.

    ``info`` names the purpose and its format version (``playa/mcp-remote/<purpose>/v1``): a key
    derived for one purpose is useless for any other the same host secret protects.
    """
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(f"the host secret must be at least {MIN_SECRET_BYTES} bytes")
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=info).derive(secret)


def _b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _b64decode(text: object, what: str) -> bytes:
    if not isinstance(text, str) or not text.isascii():
        raise MalformedSeal(f"seal {what} is not base64 text")
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise MalformedSeal(f"seal {what} is not valid base64") from None
    # Re-encoding catches what the decoder tolerates (missing padding is refused above, but
    # non-zero trailing bits are not): one value, one spelling.
    if _b64encode(data) != text:
        raise MalformedSeal(f"seal {what} is not canonical base64")
    return data


class Sealer:
    """Seals and opens header maps with a key derived once from the host secret."""

    __slots__ = ("_aead", "_key_id")

    def __init__(self, secret: bytes) -> None:
        key = derive_key(secret, _KEY_INFO)
        # The key id is another HKDF output, not a hash of the key: it names the key without
        # giving an attacker anything to test guesses of the key against.
        key_id = derive_key(secret, _KEY_ID_INFO, _KEY_ID_BYTES)
        self._aead = AESGCM(key)
        self._key_id = key_id.hex()

    @property
    def key_id(self) -> str:
        """A short, non-secret fingerprint of the key (16 hex digits)."""
        return self._key_id

    def __repr__(self) -> str:
        return f"Sealer(key_id={self._key_id!r})"

    def _aad(self, context: Mapping[str, JSONValue]) -> bytes:
        return canonical_json({"v": SEAL_VERSION, "kid": self._key_id, "context": context})

    def seal(self, context: Mapping[str, JSONValue], headers: Mapping[str, str]) -> Envelope:
        """Seal ``headers`` (may be empty) bound to ``context``; every call uses a fresh nonce."""
        nonce = os.urandom(_NONCE_BYTES)
        plaintext = canonical_json(dict(headers))
        ciphertext = self._aead.encrypt(nonce, plaintext, self._aad(context))
        return Envelope(v=SEAL_VERSION, kid=self._key_id, nonce=_b64encode(nonce), ct=_b64encode(ciphertext))

    def open(self, envelope: object, context: Mapping[str, JSONValue]) -> dict[str, str]:
        """Return the header map sealed in ``envelope`` if it was sealed with ``context``.

        Raises a ``SealError`` subclass saying why not. The envelope comes from a file anyone
        with workspace access can write, so every field is checked before it is used.
        """
        if not isinstance(envelope, dict):
            raise MalformedSeal("seal is missing or not an object")
        version = envelope.get("v")
        if type(version) is not int:
            raise MalformedSeal("seal has no format version")
        if version != SEAL_VERSION:
            shown = str(version) if abs(version) < 10**6 else "(out of range)"
            raise UnknownSealVersion(f"unknown seal version {shown}")
        if set(envelope) != _ENVELOPE_FIELDS:
            raise MalformedSeal("seal has missing or unexpected fields")
        key_id = envelope["kid"]
        if not isinstance(key_id, str) or not _KEY_ID_RE.fullmatch(key_id):
            raise MalformedSeal("seal key id is malformed")
        if key_id != self._key_id:
            raise WrongKey("sealed with another key (the host secret changed); add the server again")
        nonce = _b64decode(envelope["nonce"], "nonce")
        if len(nonce) != _NONCE_BYTES:
            raise MalformedSeal("seal nonce has the wrong length")
        ciphertext = _b64decode(envelope["ct"], "ciphertext")
        if len(ciphertext) < _TAG_BYTES:
            raise MalformedSeal("seal ciphertext is truncated")
        try:
            plaintext = self._aead.decrypt(nonce, ciphertext, self._aad(context))
        except InvalidTag:
            raise SealBroken("seal does not verify: entry was edited, moved or forged") from None
        return _header_map(plaintext)


def _header_map(plaintext: bytes) -> dict[str, str]:
    # Only reachable with a valid tag, i.e. something we sealed; checked anyway so a bug
    # elsewhere cannot hand non-string headers to an HTTP client.
    try:
        value = json.loads(plaintext)
    except ValueError:
        raise SealBroken("sealed content is not a header map") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise SealBroken("sealed content is not a header map")
    return value
