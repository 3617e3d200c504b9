"""What of one server's prompts a person may run, and what waits for the owner's decision.

A ``PromptHold`` is a part of a server's ``ServerReview`` and the only writer of its fields: each
listing of the server's prompts is held against the pins (``hold``), the owner's decision
settles what was held (``decided``), and the commands read which prompts can run. Nothing here
does I/O.
"""

from __future__ import annotations

from collections.abc import Callable

import mcp_types

from ..core import ToolChange
from ._hold import Hold
from .store import Pins, PromptPins, prompt_change

__all__ = ["PromptHold"]


class PromptHold(Hold[mcp_types.Prompt]):
    """One server's prompts as last listed, by name: the ones that can run (only these are rendered),
    and the ones held for the owner."""

    def hold(self, pins: Pins | None, offered: tuple[mcp_types.Prompt, ...]) -> PromptPins | None:
        """Sort a listing into what can run and what waits; the prompt pins to save when there were none.

        A server listed before prompts were pinned (or just added) has its prompts as they are
        now adopted: the owner added the server as it is, as its tools are.
        """
        pinned = pins.prompts if pins is not None else None
        adopted = None
        if pinned is None:
            pinned = adopted = PromptPins.of(offered)
        self._sort(
            {prompt.name: prompt for prompt in offered},
            {prompt.name: pinned.verdict(prompt) for prompt in offered},
        )
        return adopted

    def changes(self, pins: Pins | None, redact: Callable[[str], str]) -> tuple[ToolChange, ...]:
        """What the owner is shown of the held prompts (redacted, whole)."""
        pinned = pins.prompts if pins is not None and pins.prompts is not None else PromptPins()
        return tuple(
            prompt_change(prompt, pinned.approved.get(name), self.approved.get(name), redact)
            for name, prompt in sorted(self.held.items())
        )
