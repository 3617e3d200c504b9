"""How a held prompt is shown to the owner: all that a new one says, or every change in one they approved."""

from __future__ import annotations

from collections.abc import Callable

import mcp_types

from ...core import ToolChange
from ._pin_views import SAME_NOTE, _clean, _flat, _hides, _leaf_changes, _leaf_lines, _note, _value
from ._prompt_digest import prompt_definition, prompt_digest

__all__ = ["prompt_change"]


def prompt_change(
    prompt: mcp_types.Prompt,
    pinned: str | None,
    before: mcp_types.Prompt | None,
    redact: Callable[[str], str],
) -> ToolChange:
    """What the owner is shown of a held prompt: all that a new one says, or every change in one they approved.

    ``pinned`` is the approved digest (None for a new prompt); ``before`` the approved definition
    when it is still known (lost at a restart: then every value it has now). Each value is shown
    whole, cleaned of control and format characters and redacted, as a tool's are.
    """
    name = _clean(prompt.name, redact)
    now = {key: value for key, value in prompt_definition(prompt).items() if key != "name"}
    old = None
    if pinned is not None and before is not None and prompt_digest(before) == pinned:
        old = {key: value for key, value in prompt_definition(before).items() if key != "name"}
    if pinned is not None and old is not None:
        lines = _leaf_changes(_flat(old), _flat(now), redact) or [f"definition changed{SAME_NOTE}"]
    else:
        lines = [f"name: {_value(prompt.name, redact)[0]}{_note(True)}"] if _hides(prompt.name) else []
        lines += _leaf_lines(_flat(now), redact, joint=" is now: " if pinned is not None else ": ")
    return ToolChange(name, "new" if pinned is None else "changed", tuple(lines), what="prompt")
