"""What a classifier reads of a message: format characters gone, the first word folded."""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["normalize"]

# Characters that render as a slash at the start of a message; NFKC folds only some of them.
_SLASHES: Final = str.maketrans(dict.fromkeys("／∕⁄⧸╱⟋⫽", "/"))

_FIRST_WORD: Final = re.compile(r"\S+")


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
