"""What of one server's prompts a person may run, and what waits for the owner's decision.

A ``PromptHold`` is a part of a server's ``ServerReview`` and the only writer of its fields: each
listing of the server's prompts is held against the pins (``hold``), the owner's decision
settles what was held (``decided``), and the commands read which prompts can run. Nothing here
does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import mcp_types

from ..core import ToolChange
from .store import Pins, PromptPins, prompt_change

__all__ = ["PromptHold"]


@dataclass(eq=False)
class PromptHold:
    """One server's prompts as last listed: the ones that can run, and the ones held for the owner."""

    live: dict[str, mcp_types.Prompt] = field(default_factory=dict)
    """Prompts whose definition is the one the owner approved, by name: only these are rendered."""
    held: dict[str, mcp_types.Prompt] = field(default_factory=dict)
    """New or changed prompts that wait for the owner's decision, by name."""
    approved: dict[str, mcp_types.Prompt] = field(default_factory=dict)
    """The approved definitions as last seen live: what a change is shown against."""
    listed: bool = False
    """Whether the prompts were listed on the server's connection (``live`` and ``held`` say so)."""

    def hold(self, pins: Pins | None, offered: tuple[mcp_types.Prompt, ...]) -> PromptPins | None:
        """Sort a listing into what can run and what waits; the prompt pins to save when there were none.

        A server listed before prompts were pinned (or just added) has its prompts as they are
        now adopted: the owner added the server as it is, as its tools are.
        """
        pinned = pins.prompts if pins is not None else None
        adopted = None
        if pinned is None:
            pinned = adopted = PromptPins.of(offered)
        verdicts = {prompt.name: pinned.verdict(prompt) for prompt in offered}
        self.live = {prompt.name: prompt for prompt in offered if verdicts[prompt.name] == "live"}
        self.held = {prompt.name: prompt for prompt in offered if verdicts[prompt.name] == "held"}
        self.approved.update(self.live)
        self.listed = True
        return adopted

    def changes(self, pins: Pins | None, redact: Callable[[str], str]) -> tuple[ToolChange, ...]:
        """What the owner is shown of the held prompts (redacted, whole)."""
        pinned = pins.prompts if pins is not None and pins.prompts is not None else PromptPins()
        return tuple(
            prompt_change(prompt, pinned.approved.get(name), self.approved.get(name), redact)
            for name, prompt in sorted(self.held.items())
        )

    def decided(self, *, approve: bool) -> list[mcp_types.Prompt]:
        """The owner decided on the held prompts: approved ones can run at once. Returns those decided."""
        decided = list(self.held.values())
        if approve:
            self.live.update(self.held)
            self.approved.update(self.held)
        self.held = {}
        return decided

    def forget(self) -> None:
        """The connection went: the next one lists the prompts again."""
        self.live, self.held, self.listed = {}, {}, False
