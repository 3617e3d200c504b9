"""The digests definitions are pinned by: SHA-256 of canonical JSON, cut to 128 bits, base64url.

A second preimage stays out of reach, and a thousand definitions' pins stay small. Tool pins
(``_pins``) and prompt pins (``_prompt_digest``) are made of these.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal, Self

from ._read_only import read_only

__all__ = [
    "DIGEST_CHARS",
    "NULL_DIGEST",
    "DigestPins",
    "Verdict",
    "canonical",
    "digest_of",
    "is_digest",
    "short_hash",
]

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


@dataclass(frozen=True)
class DigestPins:
    """Definitions pinned by one digest each: the approved ones (key → digest) and the rejected
    ones (key → digests), sealed with the tool pins. A rejected definition stays held, silently,
    until it changes."""

    approved: Mapping[str, str] = field(default_factory=dict)
    rejected: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "approved", read_only(dict(self.approved)))
        rejected = {key: frozenset(digests) for key, digests in self.rejected.items()}
        object.__setattr__(self, "rejected", read_only(rejected))

    def verdict_of(self, key: str, digest: str) -> Verdict:
        """Whether the definition is as approved, rejected as it is, or waits for the owner."""
        if self.approved.get(key) == digest:
            return "live"
        return "rejected" if digest in self.rejected.get(key, frozenset()) else "held"

    def with_approved(self, entries: Iterable[tuple[str, str]]) -> Self:
        """These (key, digest) definitions approved."""
        return replace(self, approved={**self.approved, **dict(entries)})

    def with_rejected(self, entries: Iterable[tuple[str, str]]) -> Self:
        """These (key, digest) definitions rejected."""
        rejected = dict(self.rejected)
        for key, digest in entries:
            rejected[key] = rejected.get(key, frozenset()) | {digest}
        return replace(self, rejected=rejected)

    def encode(self) -> dict[str, object]:
        """The pins as JSON, for ``Pins.encode``."""
        return {
            "approved": dict(self.approved),
            "rejected": {key: sorted(digests) for key, digests in self.rejected.items()},
        }

    @classmethod
    def decode(cls, raw: object) -> Self | None:
        """Read what ``encode`` wrote; None for any other shape (the caller says the pins are bad)."""
        if not isinstance(raw, dict) or set(raw) != {"approved", "rejected"}:
            return None
        approved, rejected = raw["approved"], raw["rejected"]
        if not isinstance(approved, dict) or not isinstance(rejected, dict):
            return None
        if not all(is_digest(value) for value in approved.values()):
            return None
        for digests in rejected.values():
            if not isinstance(digests, list) or not all(is_digest(value) for value in digests):
                return None
        return cls(approved, {key: frozenset(digests) for key, digests in rejected.items()})
