"""Splitting a reply into Telegram messages, measured as Telegram measures them (UTF-16 units)."""

from __future__ import annotations

from typing import Final

__all__ = ["MESSAGE_LIMIT", "split_message", "utf16_len"]

MESSAGE_LIMIT: Final = 4096
"""Telegram's limit on one message's text, in UTF-16 code units after entity parsing."""


def utf16_len(text: str) -> int:
    """The length of ``text`` in UTF-16 code units: a character outside the BMP (most emoji) counts 2."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def _hard_split(line: str, limit: int) -> list[str]:
    # Python strings hold code points, so cutting between two of them never cuts a surrogate pair.
    pieces: list[str] = []
    start = size = 0
    for index, char in enumerate(line):
        width = 2 if ord(char) > 0xFFFF else 1
        if size + width > limit:
            pieces.append(line[start:index])
            start, size = index, 0
        size += width
    pieces.append(line[start:])
    return pieces


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """``text`` as messages of at most ``limit`` UTF-16 units each, cut at line breaks where it can.

    The line break at a cut is dropped; a line longer than ``limit`` is cut hard. Parts that are
    blank are left out, since Telegram refuses an empty message.
    """
    if limit < 2:
        raise ValueError("the limit must leave room for one character of any width")
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        width = utf16_len(line)
        # +1 for the newline that joins this line to the ones before it in the same part.
        if current and size + 1 + width <= limit:
            current.append(line)
            size += 1 + width
            continue
        if current:
            parts.append("\n".join(current))
        if width <= limit:
            current, size = [line], width
            continue
        *full, last = _hard_split(line, limit)
        parts.extend(full)
        current, size = [last], utf16_len(last)
    if current:
        parts.append("\n".join(current))
    return [part for part in parts if part.strip()]
