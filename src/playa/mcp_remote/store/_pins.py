"""Tool definitions pinned by digest: what the owner approved, what changed since, and how it is shown.

A server may change what a tool says it does after the owner added it (a "rug pull": a new
description that tells the model to send the chat's files somewhere). So each exposed tool's
definition — name, title, description, input and output schema, annotations — is pinned when
the server is added, as one digest per field of its canonical JSON (SHA-256 cut to 128 bits,
base64url: a second preimage stays out of reach, and a thousand tools' pins stay small), sealed
with the entry. A tool whose definition matches its pin is live; one that does not, or a new one, is
held back from the model until the owner approves it; one whose definition the owner
rejected stays hidden, silently, until it changes again.

Digests per field, not one per tool: after a restart the definitions the owner approved are
gone from memory, and the field digests still say which parts changed.

The server's ``instructions`` reach the model too (in its part of the prompt section), and a
server can change them as it can a tool. So they are pinned the same way: their digest, with
the approved text itself (bounded) so that the model keeps getting it after a restart while a
change waits; changed instructions are held, and shown as the lines that changed. Instructions
the server drops go at once, as a removed tool does: less of the server's text is no risk.

What the owner is shown of a change is every character that changed, never a cut: each leaf
of a definition (``inputSchema.properties.path.default``) or each line of the instructions,
whole, cleaned of control and format characters and redacted; a difference that cleaning
would hide is said to be there. The digest an approval carries covers the definitions and
exactly that view (``approval_digest``).
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, Literal

import mcp_types

from ...core import ToolChange, one_line
from ...exceptions import ValidationError

__all__ = [
    "HIDDEN_NOTE",
    "PIN_FIELDS",
    "SAME_NOTE",
    "Pins",
    "Verdict",
    "approval_digest",
    "change_of",
    "field_digests",
    "instructions_change",
    "pending_digest",
    "same_definitions",
    "shown_name",
    "shown_names",
    "view_digest",
    "without_format",
]

PIN_FIELDS: Final = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
_VERSION: Final = 2
_VERSIONS: Final = {1: {"v", "tools", "rejected"}, 2: {"v", "tools", "rejected", "instructions"}}
"""What each version holds: 1 is from before instructions were pinned (an entry adopts them once)."""
INSTRUCTIONS_KEPT: Final = 16_000
"""Characters of the approved instructions kept with the pins (redacted): far more than the prompt shows."""
_DIGEST_BYTES: Final = 16
_DIGEST_CHARS: Final = 22  # base64url of 16 bytes, unpadded
_DIGEST_ALPHABET: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

Verdict = Literal["live", "held", "rejected"]


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _definition(tool: mcp_types.Tool) -> dict[str, Any]:
    raw = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {name: raw.get(name) for name in PIN_FIELDS}


def _hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()[:_DIGEST_BYTES]).decode("ascii").rstrip("=")


_NULL: Final = _hash(b"null")


def field_digests(tool: mcp_types.Tool) -> tuple[str, ...]:
    """One digest per pinned field of the tool's definition, in ``PIN_FIELDS`` order (absent: null).

    Read from the fields themselves rather than a dump of the whole tool: a server of ten
    thousand tools is pinned at every listing, and most fields are absent.
    """
    annotations = tool.annotations
    values = (
        tool.name,
        tool.title,
        tool.description,
        tool.input_schema,
        tool.output_schema,
        None
        if annotations is None
        else annotations.model_dump(by_alias=True, mode="json", exclude_none=True),
    )
    return tuple(_NULL if value is None else _hash(_canonical(value)) for value in values)


def _digest(fields: Iterable[str]) -> str:
    return _hash(_canonical(list(fields)))


def instructions_digest(text: str | None) -> str:
    """The digest of a server's instructions (of none: the digest of null)."""
    return _NULL if text is None else _hash(_canonical(text))


def pending_digest(tools: Iterable[mcp_types.Tool], instructions: str | None = None) -> str:
    """One digest of held definitions and held instructions: what the owner was shown must be what they approve."""
    held = sorted([tool.name, _digest(field_digests(tool))] for tool in tools)
    return _hash(_canonical([held, None if instructions is None else instructions_digest(instructions)]))


@dataclass(frozen=True)
class Pins:
    """A server's approved definitions (tool → field digests) and rejected ones (tool → digests);
    its approved instructions (digest and text) and rejected ones (digests)."""

    tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rejected: Mapping[str, frozenset[str]] = field(default_factory=dict)
    instructions: str | None = None
    """The digest of the approved instructions; None until they are pinned (an entry from before)."""
    instructions_text: str | None = None
    """The approved instructions (their first ``INSTRUCTIONS_KEPT`` characters); None: none approved."""
    rejected_instructions: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        tools = {name: tuple(fields) for name, fields in self.tools.items()}
        object.__setattr__(self, "tools", MappingProxyType(tools))
        rejected = {name: frozenset(digests) for name, digests in self.rejected.items()}
        object.__setattr__(self, "rejected", MappingProxyType(rejected))
        object.__setattr__(self, "rejected_instructions", frozenset(self.rejected_instructions))

    @classmethod
    def of(cls, tools: Iterable[mcp_types.Tool]) -> Pins:
        """Every definition given, approved: what an add (or an entry from before pins) adopts."""
        return cls({tool.name: field_digests(tool) for tool in tools})

    def verdict(self, tool: mcp_types.Tool, fields: tuple[str, ...] | None = None) -> Verdict:
        """Whether the tool is as approved, rejected as it is, or waits; ``fields``: its digests, if known."""
        fields = field_digests(tool) if fields is None else fields
        if self.tools.get(tool.name) == fields:
            return "live"
        if _digest(fields) in self.rejected.get(tool.name, frozenset()):
            return "rejected"
        return "held"

    def approve(self, tools: Iterable[mcp_types.Tool]) -> Pins:
        approved = {tool.name: field_digests(tool) for tool in tools}
        return replace(self, tools={**self.tools, **approved})

    def reject(self, tools: Iterable[mcp_types.Tool]) -> Pins:
        rejected = dict(self.rejected)
        for tool in tools:
            rejected[tool.name] = rejected.get(tool.name, frozenset()) | {_digest(field_digests(tool))}
        return replace(self, rejected=rejected)

    def only(self, names: Iterable[str]) -> Pins:
        """The pins of these tools only: a tool the server no longer lists is new if it comes back."""
        keep = set(names)
        return replace(
            self,
            tools={name: fields for name, fields in self.tools.items() if name in keep},
            rejected={name: digests for name, digests in self.rejected.items() if name in keep},
        )

    def instructions_verdict(self, text: str | None) -> Verdict:
        """Whether the server's instructions are as approved (or none), rejected as they are, or wait.

        Pins from before instructions were pinned have none to compare with: the caller adopts
        the text first (``approve_instructions``).
        """
        digest = instructions_digest(text)
        if text is None or digest == self.instructions:
            return "live"
        return "rejected" if digest in self.rejected_instructions else "held"

    def approve_instructions(self, text: str | None, redact: Callable[[str], str]) -> Pins:
        """Approve these instructions; their text is kept redacted (then cut: never the head of a key)."""
        kept = None if text is None else redact(text)[:INSTRUCTIONS_KEPT]
        return replace(self, instructions=instructions_digest(text), instructions_text=kept)

    def reject_instructions(self, text: str) -> Pins:
        return replace(self, rejected_instructions=self.rejected_instructions | {instructions_digest(text)})

    def encode(self) -> str:
        """The pins as one JSON text, to be sealed with the entry."""
        raw: dict[str, object] = {
            "v": _VERSION,
            "tools": {name: list(fields) for name, fields in self.tools.items()},
            "rejected": {name: sorted(digests) for name, digests in self.rejected.items()},
        }
        if self.instructions is None:
            raw["v"] = 1  # not pinned yet: read back as from before, so they are adopted then
        else:
            raw["instructions"] = {
                "digest": self.instructions,
                "text": self.instructions_text,
                "rejected": sorted(self.rejected_instructions),
            }
        return json.dumps(raw, sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> Pins:
        """Read sealed pins; raises ``ValidationError`` (field ``pins``) on any other shape."""
        problem = ValidationError("pins", "the sealed tool pins have an unknown format")
        try:
            raw = json.loads(text)
        except ValueError:
            raise problem from None
        if not isinstance(raw, dict) or type(version := raw.get("v")) is not int:
            raise problem
        if _VERSIONS.get(version) != set(raw):
            raise problem
        tools, rejected = raw["tools"], raw["rejected"]
        if not isinstance(tools, dict) or not isinstance(rejected, dict):
            raise problem
        for fields in tools.values():
            if not isinstance(fields, list) or len(fields) != len(PIN_FIELDS):
                raise problem
            if not all(_is_digest(value) for value in fields):
                raise problem
        for digests in rejected.values():
            if not isinstance(digests, list) or not all(_is_digest(value) for value in digests):
                raise problem
        pins = cls(tools, {name: frozenset(digests) for name, digests in rejected.items()})
        if "instructions" not in raw:
            return pins
        instructions = raw["instructions"]
        if not isinstance(instructions, dict) or set(instructions) != {"digest", "text", "rejected"}:
            raise problem
        digest, kept, refused = instructions["digest"], instructions["text"], instructions["rejected"]
        if not _is_digest(digest) or not (kept is None or isinstance(kept, str)):
            raise problem
        if kept is not None and len(kept) > INSTRUCTIONS_KEPT:
            raise problem
        if not isinstance(refused, list) or not all(_is_digest(value) for value in refused):
            raise problem
        return replace(
            pins, instructions=digest, instructions_text=kept, rejected_instructions=frozenset(refused)
        )


def _is_digest(value: object) -> bool:
    return isinstance(value, str) and len(value) == _DIGEST_CHARS and set(value) <= _DIGEST_ALPHABET


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
    now = _definition(tool)
    lines: list[str] = []
    if pinned is None:
        if _hides(tool.name):
            lines.append(f"name: {_value(tool.name, redact)[0]}{HIDDEN_NOTE}")
        for key in PIN_FIELDS[1:]:
            for path, leaf in _flat(now[key]).items():
                label, label_hides = _label(key, path, redact)
                shown, hides = _value(leaf, redact)
                lines.append(f"{label}: {shown}{_note(label_hides, hides)}")
        return ToolChange(name, "new", tuple(lines))
    digests = field_digests(tool)
    old = _definition(before) if before is not None and field_digests(before) == tuple(pinned) else None
    for key, was, digest in zip(PIN_FIELDS, pinned, digests, strict=True):
        if was == digest:
            continue
        new_leaves = _flat(now[key])
        if old is None:
            if not new_leaves:
                lines.append(f"{key} is now {_NONE}")
            for path, leaf in new_leaves.items():
                label, label_hides = _label(key, path, redact)
                shown, hides = _value(leaf, redact)
                lines.append(f"{label} is now {shown}{_note(label_hides, hides)}")
            continue
        old_leaves = _flat(old[key])
        count = len(lines)
        for path in [*new_leaves, *(path for path in old_leaves if path not in new_leaves)]:
            was_leaf, now_leaf = old_leaves.get(path, _ABSENT), new_leaves.get(path, _ABSENT)
            absent = (was_leaf is _ABSENT, now_leaf is _ABSENT)
            if absent == (False, False) and _canonical(was_leaf) == _canonical(now_leaf):
                continue
            label, label_hides = _label(key, path, redact)
            old_shown, _ = (_NONE, False) if absent[0] else _value(was_leaf, redact)
            new_shown, hides = (_NONE, False) if absent[1] else _value(now_leaf, redact)
            note = SAME_NOTE if old_shown == new_shown else _note(label_hides, hides)
            lines.append(f"{label}: {old_shown} → {new_shown}{note}")
        if len(lines) == count:  # the digests differ: some difference is there, if none shows
            lines.append(f"{key} changed{SAME_NOTE}")
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
    return _hash(_canonical([_VIEW_VERSION, shown, list(instructions)]))


def approval_digest(
    tools: Iterable[mcp_types.Tool],
    instructions: str | None,
    changes: Iterable[ToolChange],
    shown_instructions: Sequence[str],
) -> str:
    """What an approval decides: the held definitions as they are, and exactly how they were shown.

    Two halves: ``pending_digest`` (the definitions) and ``view_digest`` (what was shown of them).
    A view that omitted or showed otherwise anything of the change names another digest, so it
    cannot approve it. ``same_definitions`` tells the halves apart.
    """
    return pending_digest(tools, instructions) + view_digest(changes, shown_instructions)


def same_definitions(digest: str, other: str) -> bool:
    """Whether two approval digests name the same held definitions (shown alike or not)."""
    return len(digest) == len(other) == 2 * _DIGEST_CHARS and digest[:_DIGEST_CHARS] == other[:_DIGEST_CHARS]
