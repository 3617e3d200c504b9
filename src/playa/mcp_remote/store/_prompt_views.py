"""How a held prompt is shown to the owner: all that a new one says, or every change in one they approved."""

from __future__ import annotations

from collections.abc import Callable

import mcp_types

from ...core import ToolChange
from ._digests import canonical
from ._pin_views import _ABSENT, _NONE, SAME_NOTE, _clean, _flat, _hides, _label, _note, _value
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
    lines: list[str] = []
    if pinned is not None and old is not None:
        new_leaves, old_leaves = _flat(now), _flat(old)
        for path in [*new_leaves, *(path for path in old_leaves if path not in new_leaves)]:
            was, is_now = old_leaves.get(path, _ABSENT), new_leaves.get(path, _ABSENT)
            if was is not _ABSENT and is_now is not _ABSENT and canonical(was) == canonical(is_now):
                continue
            label, label_hides = _label(str(path[0]), path[1:], redact)
            old_shown = _NONE if was is _ABSENT else _value(was, redact)[0]
            new_shown, hides = (_NONE, False) if is_now is _ABSENT else _value(is_now, redact)
            note = SAME_NOTE if old_shown == new_shown else _note(label_hides, hides)
            lines.append(f"{label}: {old_shown} → {new_shown}{note}")
        if not lines:
            lines.append(f"definition changed{SAME_NOTE}")
    else:
        if _hides(prompt.name):
            lines.append(f"name: {_value(prompt.name, redact)[0]}{_note(True)}")
        for path, leaf in _flat(now).items():
            label, label_hides = _label(str(path[0]), path[1:], redact)
            shown, hides = _value(leaf, redact)
            lines.append(
                f"{label}{' is now' if pinned is not None else ''}: {shown}{_note(label_hides, hides)}"
            )
    return ToolChange(name, "new" if pinned is None else "changed", tuple(lines), what="prompt")
