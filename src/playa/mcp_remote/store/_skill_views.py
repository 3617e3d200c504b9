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
from ._pin_views import SAME_NOTE, _clean, _flat, _hides, _leaf_changes, _leaf_lines, _note, _value

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
    if pinned and before is not None:
        lines = _leaf_changes(_flat(before), _flat(now), redact) or [f"entry changed{SAME_NOTE}"]
    else:
        lines = [f"path: {_value(path, redact)[0]}{_note(True)}"] if _hides(path) else []
        lines += _leaf_lines(_flat(now), redact, joint=" is now: " if pinned else ": ")
    return ToolChange(name, "changed" if pinned else "new", tuple(lines), what="skill")
