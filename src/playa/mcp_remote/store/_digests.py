"""The digests definitions are pinned by: SHA-256 of canonical JSON, cut to 128 bits, base64url.

A second preimage stays out of reach, and a thousand definitions' pins stay small. Tool pins
(``_pins``) and prompt pins (``_prompt_digest``) are made of these.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Final, Literal

__all__ = ["DIGEST_CHARS", "NULL_DIGEST", "Verdict", "canonical", "digest_of", "is_digest", "short_hash"]

_DIGEST_BYTES: Final = 16
DIGEST_CHARS: Final = 22  # base64url of 16 bytes, unpadded
_DIGEST_ALPHABET: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

Verdict = Literal["live", "held", "rejected"]
"""Whether a definition is as the owner approved it, rejected as it is, or waits for them."""


def canonical(value: object) -> bytes:
    """A JSON value's one encoding: what its digest is of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def short_hash(data: bytes) -> str:
    """SHA-256 of ``data`` cut to 128 bits, base64url without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()[:_DIGEST_BYTES]).decode("ascii").rstrip("=")


NULL_DIGEST: Final = short_hash(b"null")


def digest_of(value: object) -> str:
    """The digest of a JSON value (of its canonical encoding)."""
    return short_hash(canonical(value))


def is_digest(value: object) -> bool:
    """Whether ``value`` has a digest's shape (read from a sealed file: anything else is refused)."""
    return isinstance(value, str) and len(value) == DIGEST_CHARS and set(value) <= _DIGEST_ALPHABET
