"""What a classifier reads of a message: format characters gone, the first word folded."""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["normalize", "one_line"]

# Characters that render as a slash at the start of a message; NFKC folds only some of them.
_SLASHES: Final = str.maketrans(dict.fromkeys("／∕⁄⧸╱⟋⫽", "/"))

_FIRST_WORD: Final = re.compile(r"\S+")


_ASCII_CONTROLS: Final = {code: " " for code in (*range(32), 127)}


def _visible(c: str) -> str:
    """A format character (zero-width, bidirectional) goes; a control or a separator is a space."""
    category = unicodedata.category(c)
    if category == "Cf":
        return ""
    return " " if category[0] in "CZ" else c


def one_line(text: str) -> str:
    """Another party's text on one line: format characters (zero-width, bidirectional) gone, other
    control characters and line breaks spaces, runs of spaces one.

    Neither redacted nor cut: the caller does both, in that order. Without its format characters,
    a key split by a zero-width space is whole again for the redactor; the whole text, never a
    slice, is cleaned, as a slice could end inside a key.
    """
    kept = text.translate(_ASCII_CONTROLS) if text.isascii() else "".join(_visible(c) for c in text)
    return " ".join(kept.split())


def normalize(text: str) -> str:
    """``text`` without Unicode format characters (U+200B, U+FEFF, …), its first word folded.

    The first word gets NFKC and slash look-alikes folded, so ``／ｍｃｐ_add`` is ``/mcp_add``;
    the rest keeps its characters (a key must reach its command as it was typed).
    """
    stripped = "".join(c for c in text if unicodedata.category(c) != "Cf")
    lead = stripped.lstrip()
    first = _FIRST_WORD.match(lead)
    if first is None:
        return stripped
    folded = unicodedata.normalize("NFKC", first.group()).translate(_SLASHES)
    return folded + lead[first.end() :] if folded.startswith("/") else stripped
