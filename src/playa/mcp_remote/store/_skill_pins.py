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

from collections.abc import Iterable

from ._digests import DigestPins, Verdict

__all__ = ["SkillPins"]


class SkillPins(DigestPins):
    """A server's approved skill entries (path → digest) and rejected ones (path → digests)."""

    def verdict(self, path: str, digest: str) -> Verdict:
        """Whether the skill's entry is as approved, rejected as it is, or waits for the owner."""
        return self.verdict_of(path, digest)

    def approve(self, entries: Iterable[tuple[str, str]]) -> SkillPins:
        """These (path, digest) entries approved."""
        return self.with_approved(entries)

    def reject(self, entries: Iterable[tuple[str, str]]) -> SkillPins:
        """These (path, digest) entries rejected: they stay held, silently, until they change."""
        return self.with_rejected(entries)
