"""How a held skill is shown to the owner: all that a new entry says, or every change in one they approved.

What is shown is the skill's entry, which is what the owner approves: its front matter (the
name and description the agent is offered it by, and the rest) and each file with its size
and SHA-256 digest. The files' text is not read to show it: a host must not fetch a skill's
files ahead of need (not at approval either), and the digests make whatever the agent loads
later the exact bytes approved here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...core import ToolChange
from ._digests import canonical
from ._pin_views import _ABSENT, _NONE, SAME_NOTE, _clean, _flat, _hides, _label, _note, _value

__all__ = ["skill_change", "skill_definition"]


def skill_definition(frontmatter: Mapping[str, Any], files: Mapping[str, tuple[int, str]]) -> dict[str, Any]:
    """What of a skill the owner is shown, as JSON: its front matter, and each file's size and digest."""
    return {
        "frontmatter": dict(frontmatter),
        "files": {path: {"bytes": size, "digest": digest} for path, (size, digest) in files.items()},
    }


def skill_change(
    path: str,
    now: dict[str, Any],
    pinned: bool,
    before: dict[str, Any] | None,
    redact: Callable[[str], str],
) -> ToolChange:
    """What the owner is shown of a held skill (``now``, a ``skill_definition``).

    ``pinned``: the owner approved another entry of it; ``before`` that entry when it is still
    known (lost at a restart: then every value it has now). Each value is shown whole, cleaned of
    control and format characters and redacted, as a tool's are.
    """
    name = _clean(path, redact)
    lines: list[str] = []
    if pinned and before is not None:
        new_leaves, old_leaves = _flat(now), _flat(before)
        for leaf in [*new_leaves, *(leaf for leaf in old_leaves if leaf not in new_leaves)]:
            was, is_now = old_leaves.get(leaf, _ABSENT), new_leaves.get(leaf, _ABSENT)
            if was is not _ABSENT and is_now is not _ABSENT and canonical(was) == canonical(is_now):
                continue
            label, label_hides = _label(str(leaf[0]), leaf[1:], redact)
            old_shown = _NONE if was is _ABSENT else _value(was, redact)[0]
            new_shown, hides = (_NONE, False) if is_now is _ABSENT else _value(is_now, redact)
            note = SAME_NOTE if old_shown == new_shown else _note(label_hides, hides)
            lines.append(f"{label}: {old_shown} → {new_shown}{note}")
        if not lines:
            lines.append(f"entry changed{SAME_NOTE}")
    else:
        if _hides(path):
            lines.append(f"path: {_value(path, redact)[0]}{_note(True)}")
        for leaf, value in _flat(now).items():
            label, label_hides = _label(str(leaf[0]), leaf[1:], redact)
            shown, hides = _value(value, redact)
            lines.append(f"{label}{' is now' if pinned else ''}: {shown}{_note(label_hides, hides)}")
    return ToolChange(name, "changed" if pinned else "new", tuple(lines), what="skill")
