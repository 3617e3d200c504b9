"""Which of one server's skills the agent is offered, and which wait for the owner's decision.

A ``SkillHold`` is a part of a server's ``ServerReview`` and the only writer of its fields: each
listing of the server's skills is held against the pins (``hold``), the owner's decision settles
what was held (``decided``), and the chat's skills (``_skill_tools``) read which are live.
Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import ToolChange
from ._hold import Hold
from ._skills import Skill
from .store import Pins, SkillPins, skill_change, skill_definition

__all__ = ["SkillHold"]


def _definition(skill: Skill) -> dict[str, Any]:
    return skill_definition(skill.frontmatter, {item.path: (item.size, item.digest) for item in skill.files})


@dataclass(eq=False)
class SkillHold(Hold[Skill]):
    """One server's skills as last listed, by path: the ones the agent is offered and may load, and
    the ones held for the owner."""

    refused: list[str] = field(default_factory=list)
    """Entries of the last listing that break the extension's rules, each with why (Playa's words)."""

    def hold(self, pins: Pins | None, offered: dict[str, Skill]) -> SkillPins | None:
        """Sort a listing into what is offered and what waits; the skill pins to save when there were none.

        A server listed before skills were pinned (or just added) has its skills as they are now
        adopted: the owner added the server as it is, as its tools are.
        """
        pinned = pins.skills if pins is not None else None
        adopted = None
        if pinned is None:
            pinned = adopted = SkillPins().approve((path, skill.digest) for path, skill in offered.items())
        self._sort(offered, {path: pinned.verdict(path, skill.digest) for path, skill in offered.items()})
        return adopted

    def changes(self, pins: Pins | None, redact: Callable[[str], str]) -> tuple[ToolChange, ...]:
        """What the owner is shown of the held skills (redacted, whole)."""
        pinned = pins.skills if pins is not None and pins.skills is not None else SkillPins()
        changes = []
        for path, skill in sorted(self.held.items()):
            before = self.approved.get(path)
            known = before is not None and before.digest == pinned.approved.get(path)
            changes.append(
                skill_change(
                    path,
                    _definition(skill),
                    path in pinned.approved,
                    _definition(before) if before is not None and known else None,
                    redact,
                )
            )
        return tuple(changes)

    def pins_decided(self, pins: Pins, *, approve: bool) -> SkillPins:
        """The skill pins once the owner decided on what is held."""
        pinned = pins.skills or SkillPins()
        entries = [(path, skill.digest) for path, skill in self.held.items()]
        return pinned.approve(entries) if approve else pinned.reject(entries)

    def forget(self) -> None:
        """The connection went: the next one lists the skills again."""
        super().forget()
        self.refused = []
