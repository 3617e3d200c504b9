"""Splitting a reply into Telegram messages, measured as Telegram measures them (UTF-16 units).

A cut falls at the last line break that fits, else at the last grapheme-cluster boundary, so
a ZWJ emoji, a flag or a letter with its accents is never cut in two; each part keeps the
formatting of its own text, with offsets counted in UTF-16 units from the part's start.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Final

from ._markdown import Span

__all__ = ["MESSAGE_LIMIT", "Part", "split_formatted", "split_message", "utf16_len"]

MESSAGE_LIMIT: Final = 4096
"""Telegram's limit on one message's text, in UTF-16 code units after entity parsing."""

_ZWJ: Final = "\u200d"


def utf16_len(text: str) -> int:
    """The length of ``text`` in UTF-16 code units: a character outside the BMP (most emoji) counts 2."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


@dataclass(frozen=True, slots=True)
class Part:
    """One message's text and its entities (Bot API ``MessageEntity`` objects as dicts)."""

    text: str
    entities: list[dict[str, object]] = field(default_factory=list)


def _extends(char: str) -> bool:
    """Whether ``char`` joins the grapheme cluster before it (Unicode's Extend, ZWJ, SpacingMark)."""
    code = ord(char)
    return (
        char == _ZWJ
        or unicodedata.category(char) in ("Mn", "Me", "Mc")
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF  # skin-tone modifiers
        or 0xE0020 <= code <= 0xE007F  # tags (subdivision flags)
    )


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _boundary(text: str, index: int) -> bool:
    """Whether a grapheme cluster may end between ``text[index - 1]`` and ``text[index]``."""
    if index <= 0 or index >= len(text):
        return True
    before, after = text[index - 1], text[index]
    if before == "\r" and after == "\n":
        return False
    if _extends(after) or before == _ZWJ:
        return False
    if _regional(before) and _regional(after):
        run = 0
        while index - run - 1 >= 0 and _regional(text[index - run - 1]):
            run += 1
        return run % 2 == 0  # flags are pairs: break only after an even count
    return True


def _cuts(text: str, limit: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` ranges of the parts; a line break at a cut is left out."""
    units = [0] * (len(text) + 1)
    for i, char in enumerate(text):
        units[i + 1] = units[i] + (2 if ord(char) > 0xFFFF else 1)
    ranges: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        if units[len(text)] - units[start] <= limit:
            ranges.append((start, len(text)))
            break
        end = start
        while end < len(text) and units[end + 1] - units[start] <= limit:
            end += 1
        newline = text.rfind("\n", start, end + 1)  # a break just past the limit is dropped: it fits
        if newline > start:
            ranges.append((start, newline))
            start = newline + 1
            continue
        cut = end
        while cut > start and not _boundary(text, cut):
            cut -= 1
        if cut == start:
            cut = end  # one cluster longer than a message: cut it at a character, as a last resort
        ranges.append((start, cut))
        start = cut
    return ranges


def _entity(span: Span, offset: int, length: int) -> dict[str, object]:
    entity: dict[str, object] = {"type": span.type, "offset": offset, "length": length}
    if span.url is not None:
        entity["url"] = span.url
    if span.language is not None:
        entity["language"] = span.language
    return entity


def split_formatted(text: str, spans: list[Span], limit: int = MESSAGE_LIMIT) -> list[Part]:
    """``text`` and its spans as messages of at most ``limit`` UTF-16 units, blank parts left out."""
    if limit < 2:
        raise ValueError("the limit must leave room for one character of any width")
    parts: list[Part] = []
    for start, end in _cuts(text, limit):
        part = text[start:end]
        if not part.strip():
            continue
        entities: list[dict[str, object]] = []
        for span in spans:
            lo, hi = max(span.start, start), min(span.end, end)
            if lo >= hi or not text[lo:hi].strip():
                continue
            offset = utf16_len(text[start:lo])
            entities.append(_entity(span, offset, utf16_len(text[lo:hi])))
        parts.append(Part(part, entities))
    return parts


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Plain ``text`` as messages of at most ``limit`` UTF-16 units each, cut at line breaks where it can.

    The line break at a cut is dropped; a line longer than ``limit`` is cut at the last
    grapheme-cluster boundary that fits. Parts that are blank are left out, since Telegram
    refuses an empty message.
    """
    return [part.text for part in split_formatted(text, [], limit)]
