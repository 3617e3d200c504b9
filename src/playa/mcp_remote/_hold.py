"""What a server's review keeps of one kind of its definitions (prompts, skills) as last listed.

Each listing is sorted against the pins into what is live and what is held for the owner, and
the owner's decision settles what was held. ``PromptHold`` and ``SkillHold`` are the kinds; they
read the pins their own way. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Hold"]

T = TypeVar("T")


@dataclass(eq=False, repr=False)
class Hold(Generic[T]):
    """One server's definitions of one kind as last listed: the live ones, and the ones held for the owner."""

    live: dict[str, T] = field(default_factory=dict)
    """Definitions that are the ones the owner approved, by key: only these are used."""
    held: dict[str, T] = field(default_factory=dict)
    """New or changed definitions that wait for the owner's decision, by key."""
    approved: dict[str, T] = field(default_factory=dict)
    """The approved definitions as last seen live: what a change is shown against."""
    listed: bool = False
    """Whether they were listed on the server's connection (``live`` and ``held`` say so)."""

    def _sort(self, offered: Mapping[str, T], verdicts: Mapping[str, str]) -> None:
        """Take a listing: each definition live or held, as its verdict against the pins says."""
        self.live = {key: item for key, item in offered.items() if verdicts[key] == "live"}
        self.held = {key: item for key, item in offered.items() if verdicts[key] == "held"}
        self.approved.update(self.live)
        self.listed = True

    def decided(self, *, approve: bool) -> list[T]:
        """The owner decided on what is held: approved ones are live at once. Returns those decided."""
        decided = list(self.held.values())
        if approve:
            self.live.update(self.held)
            self.approved.update(self.held)
        self.held = {}
        return decided

    def forget(self) -> None:
        """The connection went: the next one lists them again."""
        self.live, self.held, self.listed = {}, {}, False
