"""A server's skills pinned by digest: the entries the owner approved, and the ones they rejected.

A skill (the skills extension) reaches the model as its name and description in the prompt, and
as its files when the agent loads it. What the owner approves is the skill's entry: its URI, its
front matter, and every file's SHA-256 digest and size, so the digest of the entry
(``mcp_remote._skills.skill_digest``) covers every byte the agent may load. A server that
changes a skill's text after approval changes its entry: the skill is held until the owner
approves it again, and a file served otherwise than its entry says is refused when read.
Sealed with the tool pins (``Pins.skills``), by the skill's path on its server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from ._digests import Verdict, is_digest

__all__ = ["SkillPins"]


@dataclass(frozen=True)
class SkillPins:
    """A server's approved skill entries (path → digest) and rejected ones (path → digests)."""

    approved: Mapping[str, str] = field(default_factory=dict)
    rejected: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "approved", MappingProxyType(dict(self.approved)))
        rejected = {path: frozenset(digests) for path, digests in self.rejected.items()}
        object.__setattr__(self, "rejected", MappingProxyType(rejected))

    def verdict(self, path: str, digest: str) -> Verdict:
        """Whether the skill's entry is as approved, rejected as it is, or waits for the owner."""
        if self.approved.get(path) == digest:
            return "live"
        return "rejected" if digest in self.rejected.get(path, frozenset()) else "held"

    def approve(self, entries: Iterable[tuple[str, str]]) -> SkillPins:
        """These (path, digest) entries approved."""
        return replace(self, approved={**self.approved, **dict(entries)})

    def reject(self, entries: Iterable[tuple[str, str]]) -> SkillPins:
        """These (path, digest) entries rejected: they stay held, silently, until they change."""
        rejected = dict(self.rejected)
        for path, digest in entries:
            rejected[path] = rejected.get(path, frozenset()) | {digest}
        return replace(self, rejected=rejected)

    def encode(self) -> dict[str, object]:
        """The pins as JSON, for ``Pins.encode``."""
        return {
            "approved": dict(self.approved),
            "rejected": {path: sorted(digests) for path, digests in self.rejected.items()},
        }

    @classmethod
    def decode(cls, raw: object) -> SkillPins | None:
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
        return cls(approved, {path: frozenset(digests) for path, digests in rejected.items()})
