"""A SKILL.md's front matter: the YAML block between its leading ``---`` lines, read strictly.

The skills extension asks a host to parse the front matter of a SKILL.md it fetched and compare
it field by field with the skill's entry. Agent Skills front matter is small and flat (``name``,
``description``, ``license``, ``compatibility``, ``allowed-tools``, a ``metadata`` map), so this
reads the part of YAML it is written in — block maps (nested by indentation), block lists,
plain, quoted and block (``|``, ``>``) scalars, comments — and refuses anything else (anchors,
tags, flow collections, documents) rather than guess: a skill whose front matter Playa cannot
read for certain is not loaded. No YAML library is needed for that, and none is trusted with a
hostile server's text.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Final

__all__ = ["FrontmatterError", "frontmatter_of", "same_frontmatter"]

_BLOCK: Final = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_EMPTY_BLOCK: Final = re.compile(r"\A\ufeff?---[ \t]*\r?\n---[ \t]*(?:\r?\n|\Z)")
_KEY: Final = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.\-]*)[ \t]*:(?:[ \t]+(.*))?\Z")
_INT: Final = re.compile(r"[-+]?[0-9]+\Z")
_FLOAT: Final = re.compile(
    r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z|[-+]?[0-9]+[eE][-+]?[0-9]+\Z"
)
_REFUSED_START: Final = frozenset("&*!%@`{[|>,?")
MAX_DEPTH: Final = 8

Value = str | int | float | bool | None | list["Value"] | dict[str, "Value"]


class FrontmatterError(ValueError):
    """The text has no front matter Playa reads for certain; the message says what."""


def frontmatter_of(text: str) -> dict[str, Value]:
    """The front matter of a SKILL.md as JSON values. Raises ``FrontmatterError``."""
    if _EMPTY_BLOCK.match(text):
        return {}
    match = _BLOCK.match(text)
    if match is None:
        raise FrontmatterError("it does not begin with a front matter block between --- lines")
    lines = [line.rstrip("\r") for line in match.group(1).split("\n")]
    if any("\t" in line[: len(line) - len(line.lstrip())] for line in lines):
        raise FrontmatterError("it indents with tabs")
    rows = [(len(line) - len(line.lstrip(" ")), line.strip()) for line in lines]
    value, end = _Reader(rows).block(0, 0, 0)
    if end != len(rows) or not isinstance(value, dict):
        raise FrontmatterError("it is not a map of fields")
    return value


def same_frontmatter(read: dict[str, Value], entry: dict[str, object]) -> list[str]:
    """The fields in which the front matter read from a SKILL.md and its entry differ (absent = null)."""
    return [
        key
        for key in sorted(set(read) | set(entry))
        if _canonical(read.get(key)) != _canonical(entry.get(key))
    ]


def _canonical(value: object) -> str:
    # JSON tells true from 1 and "1" from 1, as a field-by-field comparison must.
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


class _Reader:
    """Reads block collections from (indent, text) rows; comments and blank rows are skipped."""

    def __init__(self, rows: list[tuple[int, str]]) -> None:
        self.rows = rows

    def _next(self, at: int) -> int:
        while at < len(self.rows) and (not self.rows[at][1] or self.rows[at][1].startswith("#")):
            at += 1
        return at

    def block(self, at: int, indent: int, depth: int) -> tuple[Value, int]:
        """The collection whose rows start at ``at`` with exactly ``indent`` spaces."""
        if depth > MAX_DEPTH:
            raise FrontmatterError("it nests too deep")
        at = self._next(at)
        if at == len(self.rows):
            return {}, at
        if self.rows[at][1].startswith("- ") or self.rows[at][1] == "-":
            return self._list(at, indent, depth)
        return self._map(at, indent, depth)

    def _map(self, at: int, indent: int, depth: int) -> tuple[dict[str, Value], int]:
        found: dict[str, Value] = {}
        while (at := self._next(at)) < len(self.rows):
            spaces, text = self.rows[at]
            if spaces < indent:
                break
            if spaces > indent or (match := _KEY.match(text)) is None:
                raise FrontmatterError(f"line {at + 2} is not a field of the form `name: value`")
            key, rest = match.group(1), match.group(2)
            if key in found:
                raise FrontmatterError(f"the field {key!r} is there twice")
            found[key], at = self._value(rest, at, indent, depth)
        return found, at

    def _list(self, at: int, indent: int, depth: int) -> tuple[list[Value], int]:
        items: list[Value] = []
        while (at := self._next(at)) < len(self.rows):
            spaces, text = self.rows[at]
            if spaces < indent or (spaces == indent and not (text.startswith("- ") or text == "-")):
                break  # the list ended: what holds it goes on (or finds the row wrong)
            if spaces > indent:
                raise FrontmatterError(f"line {at + 2} is not an item of the list above it")
            rest = text[2:].strip()
            if _KEY.match(rest) is not None:
                raise FrontmatterError(f"line {at + 2} holds a map inside a list, which Playa does not read")
            item, at = self._value(rest or None, at, indent, depth)
            items.append(item)
        return items, at

    def _value(self, rest: str | None, at: int, indent: int, depth: int) -> tuple[Value, int]:
        """The value after ``key:`` (or ``-``) on row ``at``, and the row after it."""
        following = self._next(at + 1)
        deeper = following < len(self.rows) and self.rows[following][0] > indent
        if rest is None or rest.startswith("#"):
            if deeper:
                return self.block(following, self.rows[following][0], depth + 1)
            if (
                following < len(self.rows)
                and self.rows[following][0] == indent
                and (self.rows[following][1].startswith("- "))
            ):
                # YAML lets a map's list sit at the map's own indentation.
                return self._list(following, indent, depth + 1)
            return None, at + 1
        if rest[0] in "|>":
            return self._block_scalar(rest, at, indent)
        if rest[0] in _REFUSED_START:
            raise FrontmatterError(f"line {at + 2} uses YAML that Playa does not read ({rest[0]!r})")
        if rest[0] in "'\"":
            if deeper:
                raise FrontmatterError(f"line {at + 2} continues a quoted value over lines")
            return _quoted(rest, at), at + 1
        # A plain scalar may go on over more indented lines, folded into one.
        words, end = [_plain(rest)], at + 1
        while end < len(self.rows) and (not self.rows[end][1] or self.rows[end][0] > indent):
            if self.rows[end][1]:
                words.append(_plain(self.rows[end][1]))
            end += 1
        return _typed(" ".join(words)) if len(words) == 1 else " ".join(words), end

    def _block_scalar(self, rest: str, at: int, indent: int) -> tuple[str, int]:
        style, chomp = rest[0], rest[1:].split("#", 1)[0].strip()
        if chomp not in ("", "-", "+"):
            raise FrontmatterError(f"line {at + 2} uses a block scalar header Playa does not read")
        lines: list[str] = []
        end, inner = at + 1, None
        while end < len(self.rows):
            spaces, text = self.rows[end]
            if text and spaces <= indent:
                break
            if text and inner is None:
                inner = spaces
            if text and inner is not None and spaces < inner:
                raise FrontmatterError(f"line {end + 2} is indented less than the text it continues")
            raw = self.rows[end]
            lines.append(" " * (raw[0] - (inner or 0)) + raw[1] if raw[1] else "")
            end += 1
        body = "\n".join(lines) if style == "|" else _folded(lines)
        stripped = body.rstrip("\n")
        if chomp == "-":
            return stripped, end
        if chomp == "+":
            return body + "\n", end
        return (stripped + "\n") if stripped else "", end


def _folded(lines: list[str]) -> str:
    """A folded block's text: a break between two lines of text is a space; each empty line, one break."""
    if not lines:
        return ""
    out = lines[0]
    for before, line in itertools.pairwise(lines):
        if not line:
            out += "\n"
        elif not before:
            out += line  # the break before the empty lines went with them
        elif before.startswith(" ") or line.startswith(" "):
            out += "\n" + line  # more indented lines keep their breaks
        else:
            out += " " + line
    return out


def _plain(text: str) -> str:
    """A plain scalar's text without its comment (`` #`` starts one)."""
    cut = re.split(r"[ \t]#", text, maxsplit=1)[0].rstrip()
    if ": " in cut or cut.endswith(":"):
        raise FrontmatterError("a plain value holds `: `, which YAML reads otherwise: quote it")
    return cut


def _typed(text: str) -> Value:
    """A plain scalar as YAML's core schema types it."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


def _quoted(text: str, at: int) -> str:
    quote = text[0]
    if quote == "'":
        match = re.match(r"'((?:[^']|'')*)'[ \t]*(?:#.*)?\Z", text)
        if match is None:
            raise FrontmatterError(f"line {at + 2} has a quoted value that does not end")
        return match.group(1).replace("''", "'")
    match = re.match(r'"((?:[^"\\]|\\.)*)"[ \t]*(?:#.*)?\Z', text)
    if match is None:
        raise FrontmatterError(f"line {at + 2} has a quoted value that does not end")
    try:
        # YAML's double-quoted escapes that JSON shares; any other is refused.
        value = json.loads(f'"{match.group(1)}"')
    except ValueError:
        raise FrontmatterError(f"line {at + 2} has an escape Playa does not read") from None
    assert isinstance(value, str)
    return value
