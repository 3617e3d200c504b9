"""The one inbound classifier: what a chat message is, before anything else sees it.

Every front end and the host ask the same question of every message — is it a command, does it
hold a credential, may it reach the model — and get the same answer from :func:`classify`. The
text is normalized first, so that tricks that hide a command from a naive check (a zero-width
space or a byte-order mark before the slash, a fullwidth or division slash) do not turn a
``/mcp_add … --bearer KEY`` into an ordinary message for the model.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs

from ._commands import ParsedCommand, parse_command
from ._normalize import normalize
from ._redact import REDACTED

if TYPE_CHECKING:
    from ._commands import CommandRouter

__all__ = ["Inbound", "classify", "holds_key", "looks_like_credential", "mask_known_keys", "oauth_redirect"]

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


def looks_like_credential(word: str) -> bool:
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
    if len(word) < _MIN_SHAPED or word.startswith(("/", "./", "~/")):
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


def _only_a_credential(text: str) -> bool:
    words = text.split()
    if len(words) == 2 and words[0].lower() in _SCHEMES:
        words = words[1:]
    return len(words) == 1 and looks_like_credential(words[0])


_QUERY_WORD: Final = re.compile(r"(?<!\S)[^\s?]*\?\S+")  # from a word's start: linear in the text


def oauth_redirect(text: str) -> str | None:
    """The address an OAuth login ended at, when ``text`` holds one: else None.

    Any word with a query that has both ``code`` and ``state`` (``…/oauth/callback?code=…&state=…``):
    the code is unused and exchangeable, so the message is a credential wherever it was meant to go.
    """
    for match in _QUERY_WORD.finditer(text):
        word = match.group().rstrip(".,;:!)]}>\"'")
        params = parse_qs(word.partition("?")[2])
        if params.get("code") and params.get("state"):
            return word
    return None


@dataclass(frozen=True, slots=True)
class Inbound:
    """What one message is. ``text`` is the normalized message."""

    text: str
    command: ParsedCommand | None
    carries_secret: bool
    """The message holds a credential: the front end deletes it where it can."""
    credential_shaped: bool
    """The message is nothing but a credential-shaped token: it never reaches the model."""
    oauth_redirect: str | None = None
    """The address an OAuth login ended at, pasted as a message (see :func:`oauth_redirect`): it
    never reaches the model or the history; the host hands it to the owner's pending login."""
    near_command: str | None = None
    """The owner's command this message is close to (``mcp_add …``, ``\\mcp_add …``, ``/add-mcp …``).

    Set for a message that is no command but carries a key (it never reaches the model: the
    person is pointed to the command), and for an unknown command (its reply names this one)."""
    masked_text: str | None = None
    """The message with its well-known keys masked (:func:`mask_known_keys`), when it had any."""

    @property
    def model_text(self) -> str:
        """What the agent gets of the message (and what its history keeps)."""
        return self.text if self.masked_text is None else self.masked_text

    @property
    def to_model(self) -> bool:
        """Whether the message may go to the agent."""
        return (
            self.command is None
            and not self.credential_shaped
            and self.oauth_redirect is None
            and self.near_command is None
            and bool(self.text.strip())
        )

    def __repr__(self) -> str:
        if self.command is not None:
            kind = f"/{self.command.name}"
        elif self.credential_shaped:
            kind = "credential"
        elif self.near_command is not None:
            kind = f"near /{self.near_command}"
        else:
            kind = "text, keys masked" if self.masked_text is not None else "text"
        return f"Inbound({kind}, secret={self.carries_secret})"


def classify(text: str, commands: CommandRouter) -> Inbound:
    """Classify one message of a chat; the only place that decides where a message goes."""
    normal = normalize(text)
    parsed = parse_command(normal)
    if parsed is not None:
        command = commands.get(parsed.name)
        secret = holds_key(parsed.args)
        secret = secret or oauth_redirect(parsed.args) is not None
        if command is not None:
            secret = secret or command.carries_secret(parsed.args)
        else:
            # An unknown /mcp… command may be a mistyped /mcp_add with a key in it.
            near = _near_command(normal, commands)
            secret = (
                secret or parsed.name.startswith("mcp") or (near is not None and _carries_key(near, commands))
            )
            return Inbound(normal, parsed, secret, False, near_command=near[0] if near else None)
        return Inbound(normal, parsed, secret, credential_shaped=False)
    shaped = _only_a_credential(normal)
    redirect = None if shaped else oauth_redirect(normal)
    near = None if shaped or redirect is not None else _near_command(normal, commands)
    if near is not None and not _carries_key(near, commands):
        near = None
    if near is None and not shaped and redirect is None:
        near = _quoted_command(normal, commands)
    masked, count = mask_known_keys(normal)
    return Inbound(
        normal,
        None,
        carries_secret=shaped or redirect is not None or near is not None or count > 0,
        credential_shaped=shaped,
        oauth_redirect=redirect,
        near_command=near[0] if near else None,
        masked_text=masked if count else None,
    )


# The start of a message that may name a command: any slashes or backslashes, then words joined
# by '_' or '-' (no doubled ones: in "mcp_add--bearer=KEY" the name ends before "--").
_NEAR_HEAD: Final = re.compile(r"(?P<slashes>[/\\]*)(?P<name>[A-Za-z0-9]+(?:[_-][A-Za-z0-9]+)*)(?:@\w+)?")
_NEXT_WORD: Final = re.compile(r"\s+(?P<word>[A-Za-z0-9]+)(?=\s|$)")


def _spellings(name: str) -> set[str]:
    parts = name.lower().split("_")
    return {" ".join(sorted(parts)), "".join(parts), "".join(reversed(parts))}


def _near_command(text: str, commands: CommandRouter) -> tuple[str, str] | None:
    """The owner's command that ``text`` starts close to, and the text after its name.

    Close: the name without its slash, with a backslash or two slashes, with '-' for '_', its
    words swapped or run together (``mcp_add``, ``\\mcp_add``, ``//mcp_add``, ``/mcp-add``,
    ``/add-mcp``, ``mcpadd``, ``mcp add``). A one-word name (``reset``, ``stop``) counts only
    after a slash or backslash: without one it is an ordinary first word of a sentence.
    """
    head = _NEAR_HEAD.match(text.lstrip())
    if head is None:
        return None
    rest = text.lstrip()[head.end() :]
    parts = re.split(r"[_-]", head["name"].lower())
    heads = [(" ".join(sorted(parts)), rest), ("".join(parts), rest)]
    if len(parts) == 1 and (following := _NEXT_WORD.match(rest)):
        pair = [parts[0], following["word"].lower()]
        heads.append((" ".join(sorted(pair)), rest[following.end() :]))
    for command in commands.all():
        if not command.owner_only or ("_" not in command.name and not head["slashes"]):
            continue
        spellings = _spellings(command.name)
        for spelled, after in heads:
            if spelled in spellings:
                return command.name, after
    return None


# A slash or backslash that starts a word inside a message: "`/mcp_add …`", "> /mcp_add …", "I ran /mcp_add …".
_SLASHED: Final = re.compile(r"(?<![^\s`'\">*(\[-])[/\\]+(?=[A-Za-z])")


def _quoted_command(text: str, commands: CommandRouter) -> tuple[str, str] | None:
    """An owner's command, slashed, further in the message (in backticks, a quote, a sentence)
    with a key or a secret flag's value after it: the person pasted the command, key and all."""
    for match in _SLASHED.finditer(text, 1):
        near = _near_command(text[match.start() :], commands)
        if near is not None and _carries_key(near, commands):
            return near
    return None


def _carries_key(near: tuple[str, str], commands: CommandRouter) -> bool:
    """Whether what follows a command's near name holds a key: a key-shaped word, or the value
    of a flag that a command would keep secret (``--bearer hunter2hunter2``), whichever command
    was meant: the flags may be another's (``//mcp_list --bearer …``)."""
    rest = near[1].strip()
    if holds_key(rest):
        return True
    return "--" in rest and any(command.carries_secret(rest) for command in commands.all())
