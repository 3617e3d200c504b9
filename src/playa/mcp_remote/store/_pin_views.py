"""How a server's held changes are shown to the owner, and the digest of exactly that view.

What the owner is shown of a change is every character that changed, never a cut: each leaf
of a definition (``inputSchema.properties.path.default``) or each line of the instructions,
whole, cleaned of control and format characters and redacted; a difference that cleaning
would hide is said to be there. The digest an approval carries covers the definitions
(``_pins.pending_digest``) and exactly that view (``approval_digest``).
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final

import mcp_types

from ...core import ToolChange, one_line
from ._pins import DIGEST_CHARS, PIN_FIELDS, canonical, definition, digest_of, field_digests, pending_digest

__all__ = [
    "HIDDEN_NOTE",
    "SAME_NOTE",
    "approval_digest",
    "change_of",
    "instructions_change",
    "same_definitions",
    "shown_name",
    "shown_names",
    "view_digest",
    "without_format",
]

_ASCII_HIDDEN: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def without_format(text: str) -> str:
    """``text`` without Unicode format characters (zero-width, bidirectional): what redaction must see.

    A key split by a zero-width space is the key to whoever reads it, and whole again once the
    space goes: only then can the redactor find it.
    """
    if text.isascii():
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def _clean(text: str, redact: Callable[[str], str], limit: int | None = None) -> str:
    """A server's text made safe to show: one line, no control or format characters, redacted (cut to ``limit``).

    Stripped before redacting (a key split by a zero-width character is whole again once it
    goes, and must be caught then), cut after it (a cut first could keep the head of a key).
    The whole text, never a slice of it: a slice could end inside a key, and keys redacted
    before it (a long token, again and again) would bring that head into what is shown.
    What an approval shows is never cut (``limit`` None): what does not fit is not approved.
    """
    shown = redact(one_line(text))
    return shown if limit is None or len(shown) <= limit else shown[: limit - 1] + "…"


def _hides(text: str) -> bool:
    """Whether cleaning takes from ``text`` more than spacing: control, format or unassigned characters.

    They are not shown (a bidirectional override could reorder what the owner reads), so a line
    that holds them says so: the model would get text the owner did not see.
    """
    if text.isascii():
        return _ASCII_HIDDEN.search(text) is not None
    return any(unicodedata.category(c)[0] == "C" and c not in "\t\n\r" for c in text)


HIDDEN_NOTE: Final = "  [it also holds characters not shown: control or format characters]"
SAME_NOTE: Final = "  [it differs only in characters not shown: control, format, spacing or redacted]"
_SAME_LINES_NOTE: Final = (
    "  [the lines above differ only in characters not shown: control, format, spacing or redacted]"
)
_NONE: Final = "(none)"
_ABSENT: Final = object()
_PLAIN_KEY: Final = re.compile(r"[A-Za-z0-9_$@-]+")
_MAX_DEPTH: Final = 32
"""Levels of a schema shown as paths; anything deeper is shown as its JSON, whole."""
_VIEW_VERSION: Final = 1

_Path = tuple[str | int, ...]


def _scalar(value: object) -> bool:
    return not isinstance(value, dict | list)


def _leaves(value: object, path: _Path = ()) -> Iterator[tuple[_Path, object]]:
    """Every leaf of a JSON value with its path: a schema as the lines the owner compares.

    A list of plain values (an ``enum``, ``required``) is one leaf; an empty object or list is a
    leaf of its own, so that no key of the definition goes unshown.
    """
    if isinstance(value, dict) and value and len(path) < _MAX_DEPTH:
        for key in sorted(value):
            yield from _leaves(value[key], (*path, key))
    elif isinstance(value, list) and value and len(path) < _MAX_DEPTH and not all(map(_scalar, value)):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path, value


def _label(key: str, path: _Path, redact: Callable[[str], str]) -> tuple[str, bool]:
    """A leaf's name as shown (``inputSchema.properties.word.default``), and whether it hides characters."""
    parts = [key]
    hides = False
    for step in path:
        if isinstance(step, int):
            parts.append(f"[{step}]")
            continue
        shown = _clean(step, redact)
        hides = hides or _hides(step)
        parts.append(
            f".{shown}" if _PLAIN_KEY.fullmatch(shown) else f"[{json.dumps(shown, ensure_ascii=False)}]"
        )
    return "".join(parts), hides


def _value(value: object, redact: Callable[[str], str]) -> tuple[str, bool]:
    """A leaf's value as shown, whole (strings quoted), and whether it hides characters."""
    if isinstance(value, str):
        return json.dumps(_clean(value, redact), ensure_ascii=False), _hides(value)
    if isinstance(value, list) and all(map(_scalar, value)):
        items = [_value(item, redact) for item in value]
        return "[" + ", ".join(text for text, _ in items) + "]", any(hides for _, hides in items)
    if isinstance(value, dict | list):  # deeper than the paths go, or empty
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        return _clean(text, redact), _hides(text)
    return redact(json.dumps(value)), False


def _flat(value: object) -> dict[_Path, object]:
    return {} if value is None else dict(_leaves(value))


def _note(*hides: bool) -> str:
    return HIDDEN_NOTE if any(hides) else ""


def _leaf_label(key: str | None, path: _Path, redact: Callable[[str], str]) -> tuple[str, bool]:
    """``_label`` of a leaf of the field ``key``, or (``key`` None) of a path whose first step names it."""
    return _label(key, path, redact) if key is not None else _label(str(path[0]), path[1:], redact)


def _leaf_lines(
    leaves: dict[_Path, object], redact: Callable[[str], str], *, key: str | None = None, joint: str = ": "
) -> list[str]:
    """Each leaf as the owner is shown it, whole: ``label{joint}value``, and a note if either hides characters."""
    lines: list[str] = []
    for path, leaf in leaves.items():
        label, label_hides = _leaf_label(key, path, redact)
        shown, hides = _value(leaf, redact)
        lines.append(f"{label}{joint}{shown}{_note(label_hides, hides)}")
    return lines


def _leaf_changes(
    old_leaves: dict[_Path, object],
    new_leaves: dict[_Path, object],
    redact: Callable[[str], str],
    *,
    key: str | None = None,
) -> list[str]:
    """Every leaf that differs between two definitions: ``label: old → new`` (``(none)`` where absent).

    A change that cleaning makes look like none says that it differs.
    """
    lines: list[str] = []
    for path in [*new_leaves, *(path for path in old_leaves if path not in new_leaves)]:
        was, is_now = old_leaves.get(path, _ABSENT), new_leaves.get(path, _ABSENT)
        if was is not _ABSENT and is_now is not _ABSENT and canonical(was) == canonical(is_now):
            continue
        label, label_hides = _leaf_label(key, path, redact)
        old_shown = _NONE if was is _ABSENT else _value(was, redact)[0]
        new_shown, hides = (_NONE, False) if is_now is _ABSENT else _value(is_now, redact)
        note = SAME_NOTE if old_shown == new_shown else _note(label_hides, hides)
        lines.append(f"{label}: {old_shown} → {new_shown}{note}")
    return lines


def change_of(
    tool: mcp_types.Tool,
    pinned: Sequence[str] | None,
    before: mcp_types.Tool | None,
    redact: Callable[[str], str],
) -> ToolChange:
    """What the owner is shown of a held tool: all that a new one says, or every change in one they approved.

    ``pinned`` is the tool's approved field digests (None for a new tool); ``before`` the
    approved definition when it is still known (lost at a restart: then every value of the
    fields that changed, as they are now). Every text is shown whole: the description, the
    title, each leaf of the input and output schema (a property's type, description, default,
    enum, examples, …) and of the annotations, each stripped of control and format characters
    and redacted with ``redact``. A value whose shown text hides characters says so, and so
    does a change that cleaning would make look like none.
    """
    name = _clean(tool.name, redact)
    now = definition(tool)
    lines: list[str] = []
    if pinned is None:
        if _hides(tool.name):
            lines.append(f"name: {_value(tool.name, redact)[0]}{HIDDEN_NOTE}")
        for key in PIN_FIELDS[1:]:
            lines += _leaf_lines(_flat(now[key]), redact, key=key)
        return ToolChange(name, "new", tuple(lines))
    digests = field_digests(tool)
    old = definition(before) if before is not None and field_digests(before) == tuple(pinned) else None
    for key, was, digest in zip(PIN_FIELDS, pinned, digests, strict=True):
        if was == digest:
            continue
        new_leaves = _flat(now[key])
        if old is None:
            if not new_leaves:
                lines.append(f"{key} is now {_NONE}")
            lines += _leaf_lines(new_leaves, redact, key=key, joint=" is now ")
            continue
        # The digests differ: some difference is there, if none shows.
        lines += _leaf_changes(_flat(old[key]), new_leaves, redact, key=key) or [f"{key} changed{SAME_NOTE}"]
    return ToolChange(name, "changed", tuple(lines))


def shown_name(name: str, redact: Callable[[str], str]) -> str:
    """A server's tool name fit for a line of its own: cleaned and redacted, whole, as an approval shows it."""
    return _clean(name, redact)


def shown_names(names: Iterable[str], redact: Callable[[str], str], most: int = 8) -> str:
    """Tool names fit for a sentence: cleaned, redacted, cut, the first ``most`` and how many more."""
    listed = sorted(_clean(name, redact, 40) for name in names)
    more = f" and {len(listed) - most} more" if len(listed) > most else ""
    return ", ".join(listed[:most]) + more


def _raw_lines(text: str | None) -> list[str]:
    """Instructions as the lines the owner compares (as the server sent them; none that show as nothing)."""
    if not text:
        return []
    return [line for line in text.splitlines() if _clean(line, _same)]


def _same(text: str) -> str:
    return text


def _quoted(line: str, redact: Callable[[str], str]) -> str:
    return json.dumps(_clean(line, redact), ensure_ascii=False) + _note(_hides(line))


def instructions_change(before: str | None, after: str, redact: Callable[[str], str]) -> tuple[str, ...]:
    """What the owner is shown of changed instructions: every line gone and every line new, or all that new ones say.

    ``before`` is the approved text (None: none were approved). Each line is shown whole,
    stripped of control and format characters and redacted, as a tool's texts are; lines that
    cleaning would make look unchanged say that they differ.
    """
    old, new = _raw_lines(before), _raw_lines(after)
    if not old:
        return tuple(f"say: {_quoted(line, redact)}" for line in new) or ("say nothing visible",)
    shown_old = [_quoted(line, redact) for line in old]
    shown_new = [_quoted(line, redact) for line in new]
    if shown_old == shown_new:
        return ("changed in spacing or invisible characters only",)
    lines: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        lines += [f"- {line}" for line in shown_old[i1:i2]]
        lines += [f"+ {line}" for line in shown_new[j1:j2]]
        if shown_old[i1:i2] == shown_new[j1:j2]:
            lines.append(_SAME_LINES_NOTE)
    return tuple(lines)


def view_digest(changes: Iterable[ToolChange], instructions: Sequence[str]) -> str:
    """The digest of what the owner is shown of a server's held changes (``change_of``, ``instructions_change``)."""
    shown = [[change.tool, change.kind, list(change.diff)] for change in changes]
    return digest_of([_VIEW_VERSION, shown, list(instructions)])


def approval_digest(
    tools: Iterable[mcp_types.Tool],
    instructions: str | None,
    changes: Iterable[ToolChange],
    shown_instructions: Sequence[str],
    prompts: Iterable[mcp_types.Prompt] = (),
    skills: Iterable[tuple[str, str]] = (),
) -> str:
    """What an approval decides: the held definitions as they are, and exactly how they were shown.

    Two halves: ``pending_digest`` (the definitions) and ``view_digest`` (what was shown of them).
    A view that omitted or showed otherwise anything of the change names another digest, so it
    cannot approve it. ``same_definitions`` tells the halves apart.
    """
    return pending_digest(tools, instructions, prompts, skills) + view_digest(changes, shown_instructions)


def same_definitions(digest: str, other: str) -> bool:
    """Whether two approval digests name the same held definitions (shown alike or not)."""
    return len(digest) == len(other) == 2 * DIGEST_CHARS and digest[:DIGEST_CHARS] == other[:DIGEST_CHARS]
