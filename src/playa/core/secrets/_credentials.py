"""What looks like a credential: the one classifier every check of a message, an argument or a name uses.

A word is a credential when it carries a known key prefix, is shaped like a token (long, random,
mixed classes), is a long hex or base64 run or a UUID, or a JWT. :func:`holds_key` asks it of every
word of a text; :func:`mask_known_keys` removes well-known keys from a sentence.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from typing import Final

from ._forms import REDACTED

__all__ = ["KEY_PREFIXES", "holds_key", "looks_like_credential", "mask_known_keys", "only_a_credential"]

KEY_PREFIXES: Final = (
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "pk_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "xapp-",
    "glpat-",
    "gldt-",
    "AKIA",
    "ASIA",
    "AIza",
    "ya29.",
    "hf_",
    "npm_",
    "pypi-",
    "lin_api_",
    "ntn_",
    "secret_",
    "sntrys_",
    "shpat_",
    "dop_v1_",
    "SG.",
)
"""Prefixes that well-known services give their keys: a word that starts with one is a key."""

_MIN_PREFIXED = 8  # characters after a known prefix
_MIN_SHAPED = 20  # characters of a key without a known prefix
_MIN_ENTROPY = 3.5  # bits per character; English words and paths stay below, random keys above
_MIN_HEX = 32  # hex digits in one run: 128 bits, the shortest key that is written in hex
_MIN_HEX_DISTINCT = 8  # different digits in such a run: random hex of 32 has about 14
_MIN_BASE64 = 24  # base64 characters in one run: 144 bits
_MIN_DISTINCT = 12  # different characters in such a run: random base64 of 24 has about 20
_MIN_CHANGES = 0.4
"""Share of neighbouring letters and digits in a base64 run that change class (upper, lower,
digit): about 0.6 in random base64, about 0.3 in a camelCase or Title-Case name."""
_TOKEN_WORD: Final = re.compile(r"[A-Za-z0-9_\-.~+/=:]+")
_SCHEMES: Final = ("bearer", "token", "basic")
_STRETCH: Final = re.compile(r"[A-Za-z0-9]{12,}")
_RANDOM_RUN: Final = re.compile(rf"[A-Za-z0-9]{{{_MIN_PREFIXED},}}")
_HEX_RUN: Final = re.compile(rf"[0-9A-Fa-f]{{{_MIN_HEX},}}")
# 16 bytes or more as pairs with one separator ("9f:8e:…", "9F-8E-…"), and a UUID.
_HEX_PAIRS: Final = re.compile(r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){14,}")
_UUID: Final = re.compile(r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}")
_BASE64_RUN: Final = re.compile(rf"[A-Za-z0-9+/_-]{{{_MIN_BASE64},}}")
_JWT: Final = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
# A well-known key inside a sentence: a known prefix that no letter or digit comes before.
_KNOWN_KEY: Final = re.compile(
    rf"(?<![A-Za-z0-9])(?:{'|'.join(map(re.escape, KEY_PREFIXES))})[A-Za-z0-9_\-.+/=]*"
    rf"|(?<![A-Za-z0-9_-]){_JWT.pattern}"
)
# What a value is cut into for the key check: its words, and the parts of a word between the
# characters that join a key to something else (--bearer=KEY, name:KEY, a URL's pieces).
_WORDS: Final = re.compile(r"[^\s\"'`,;<>()\[\]{}|\\]+")
_JOINS: Final = re.compile(r"[=:/?&#@]+")


def _entropy(word: str) -> float:
    counts = Counter(word)
    total = len(word)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _class(char: str) -> int:
    return 0 if char.isdigit() else 1 if char.isupper() else 2


def _random_run(run: str, *, minimum: int) -> bool:
    """Whether a run of letters and digits (and base64's symbols) looks drawn at random.

    Long enough, with at least two of upper case, lower case and digits, and their class
    changing often between neighbours: a name in camelCase or Title-Case changes class once a
    word, a random key about every other character.
    """
    if len(run) < minimum or len(set(run)) < _MIN_DISTINCT:
        return False
    classes = [_class(c) for c in run if c.isalnum()]
    if len(set(classes)) < 2:
        return False
    pairs = [(a, b) for a, b in itertools.pairwise(run) if a.isalnum() and b.isalnum()]
    changes = sum(_class(a) != _class(b) for a, b in pairs)
    return bool(pairs) and changes >= _MIN_CHANGES * len(pairs)


def _prefixed_key(word: str) -> bool:
    """A known prefix and then something random: ``ghp_`` + 36 characters, not ``npm_config_cache``.

    After the prefix, a run of at least 8 letters and digits that holds a digit or both cases
    (``sk-12345678``, ``hf_AbCd…``), or one of at least 16: a word such as ``hf_doc_search``
    or ``secret_santa_list`` has only short lower-case runs.
    """
    for prefix in KEY_PREFIXES:
        if word.startswith(prefix) and len(word) >= len(prefix) + _MIN_PREFIXED:
            for run in _RANDOM_RUN.findall(word[len(prefix) :]):
                mixed = any(c.isupper() for c in run) and any(c.islower() for c in run)
                if len(run) >= 2 * _MIN_PREFIXED or mixed or any(c.isdigit() for c in run):
                    return True
    return False


def looks_like_credential(word: str, *, after_scheme: bool = False) -> bool:
    """Whether one word has the shape of an API key or token: the one test of a value's shape.

    - a known key prefix (``sk-``, ``ghp_``, ``github_pat_``, ``xoxb-``, ``glpat-``, ``AKIA`` …)
      followed by at least 8 random-looking characters (see :func:`_prefixed_key`), or a JWT;
    - a run of 32 or more hex digits (letters and digits both; 16 bytes as ``9f:8e:…`` too), or
      a UUID, whatever its entropy: hex has at most 4 bits a character, and a fifth of random
      32-digit keys fall under the entropy floor;
    - a run of 24 or more base64 characters that mixes classes as random text does;
    - or 20 or more characters of the alphabets keys use, letters and digits, with high entropy
      and 12 or more in one stretch of digits and letters or of both cases (so that a name of
      short words, ``github-enterprise-2024``, is no key).

    Links are not keys (their parts may be: see :func:`holds_key`), nor are paths by their
    entropy alone (base64 may start with '/', so the runs are looked for in them).

    ``after_scheme``: the word follows an auth scheme (``Bearer x``), where nothing but a
    credential is meant. Then 20 or more such characters as random as a key's (letters, and
    digits, both cases or symbols) are one, with no long stretch: random base64 that its ``/``
    and ``+`` cut into short runs falls short of every other test by chance (about 1 key of 250
    of 16 bytes).
    """
    if not _TOKEN_WORD.fullmatch(word) or "://" in word:
        return False
    if _prefixed_key(word) or _JWT.fullmatch(word) or _HEX_PAIRS.search(word) or _UUID.search(word):
        return True
    for run in _HEX_RUN.findall(word):
        digits = any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
        if digits and len(set(run.lower())) >= _MIN_HEX_DISTINCT:
            return True
    if any(_random_run(run, minimum=_MIN_BASE64) for run in _BASE64_RUN.findall(word)):
        return True
    if len(word) < _MIN_SHAPED:
        return False
    if after_scheme:
        return (
            any(c.isalpha() for c in word)
            and (_mixed_stretch(word) or not word.isalnum())
            and _entropy(word) >= _MIN_ENTROPY
        )
    if word.startswith(("/", "./", "~/")):
        return False
    if not (any(c.isdigit() for c in word) and any(c.isalpha() for c in word)):
        return False
    # A name joins short words (github-enterprise-2024, search_v2_documents): a key has a long
    # stretch of letters and digits, digits or both cases in it.
    return any(map(_mixed_stretch, _STRETCH.findall(word))) and _entropy(word) >= _MIN_ENTROPY


def _mixed_stretch(run: str) -> bool:
    return any(c.isdigit() for c in run) or (any(c.isupper() for c in run) and any(c.islower() for c in run))


def holds_key(text: str) -> bool:
    """Whether a value, or any word of it, or any part of a word, looks like a key.

    What every value of an owner's command is checked with (names, ``--tools`` entries, header
    names, flags) before it is stored or quoted, and what tells a message close to a command
    that carries a key.
    """
    for word in _WORDS.findall(text):
        if looks_like_credential(word) or any(looks_like_credential(part) for part in _JOINS.split(word)):
            return True
    return False


def mask_known_keys(text: str) -> tuple[str, int]:
    """``text`` with every well-known key (a :data:`KEY_PREFIXES` key, a JWT) replaced by REDACTED.

    And how many were replaced. Only well-known formats are masked inside a sentence: a long
    hex or base64 word there is more often a commit, a checksum or an id than a key.
    """
    count = 0

    def masked(match: re.Match[str]) -> str:
        nonlocal count
        key = match.group().rstrip(".")
        if not (_prefixed_key(key) or _JWT.fullmatch(key)):
            return match.group()
        count += 1
        return REDACTED + match.group()[len(key) :]

    return _KNOWN_KEY.sub(masked, text), count


def only_a_credential(text: str) -> bool:
    """Whether ``text`` is one credential and nothing else (a scheme word such as ``Bearer`` allowed)."""
    words = text.split()
    if len(words) == 2 and words[0].lower() in _SCHEMES:
        return looks_like_credential(words[1], after_scheme=True)
    return len(words) == 1 and looks_like_credential(words[0])
