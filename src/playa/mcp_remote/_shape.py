"""Whether one word looks like a credential (stand-in until the host's classifier provides it)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Final

__all__ = ["looks_like_credential"]

_PREFIXES: Final = ("sk-", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "xoxb-", "xoxp-", "glpat-", "AKIA")
_MIN_LENGTH: Final = 20
_MIN_BITS_PER_CHAR: Final = 3.0


def looks_like_credential(word: str) -> bool:
    """A known key prefix, or 20+ characters of high entropy without spaces."""
    if word.startswith(_PREFIXES) and len(word) > 8:
        return True
    if len(word) < _MIN_LENGTH or any(c.isspace() for c in word):
        return False
    counts = Counter(word)
    bits = -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())
    letters = any(c.isalpha() for c in word)
    digits = any(c.isdigit() for c in word)
    return bits >= _MIN_BITS_PER_CHAR and letters and digits
