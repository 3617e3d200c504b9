"""The one inbound classifier: what a chat message is, before anything else sees it.

Every front end and the host ask the same question of every message — is it a command, does it
hold a credential, may it reach the model — and get the same answer from :func:`classify`. The
text is normalized first, so that tricks that hide a command from a naive check (a zero-width
space or a byte-order mark before the slash, a fullwidth or division slash) do not turn a
``/mcp_add … --bearer KEY`` into an ordinary message for the model.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs

from ._commands import ParsedCommand, parse_command
from ._normalize import normalize

if TYPE_CHECKING:
    from ._commands import CommandRouter

__all__ = ["Inbound", "classify", "looks_like_credential", "oauth_redirect"]

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
_TOKEN_WORD: Final = re.compile(r"[A-Za-z0-9_\-.~+/=:]+")
_SCHEMES: Final = ("bearer", "token", "basic")


def _entropy(word: str) -> float:
    counts = Counter(word)
    total = len(word)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def looks_like_credential(word: str) -> bool:
    """Whether one word has the shape of an API key or token.

    A known key prefix (``sk-``, ``ghp_``, ``github_pat_``, ``xoxb-``, ``glpat-``, ``AKIA`` …)
    followed by at least 8 characters; or 20 or more characters of the alphabets keys use, with
    letters and digits mixed and high entropy. Links and paths are not keys.
    """
    if not _TOKEN_WORD.fullmatch(word) or "://" in word or word.startswith(("/", "./", "~/")):
        return False
    for prefix in KEY_PREFIXES:
        if word.startswith(prefix) and len(word) >= len(prefix) + _MIN_PREFIXED:
            return True
    if len(word) < _MIN_SHAPED:
        return False
    has_digit = any(c.isdigit() for c in word)
    has_alpha = any(c.isalpha() for c in word)
    return has_digit and has_alpha and _entropy(word) >= _MIN_ENTROPY


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

    @property
    def to_model(self) -> bool:
        """Whether the message may go to the agent."""
        return (
            self.command is None
            and not self.credential_shaped
            and self.oauth_redirect is None
            and bool(self.text.strip())
        )

    def __repr__(self) -> str:
        kind = (
            f"/{self.command.name}" if self.command else ("credential" if self.credential_shaped else "text")
        )
        return f"Inbound({kind}, secret={self.carries_secret})"


def classify(text: str, commands: CommandRouter) -> Inbound:
    """Classify one message of a chat; the only place that decides where a message goes."""
    normal = normalize(text)
    parsed = parse_command(normal)
    if parsed is not None:
        command = commands.get(parsed.name)
        secret = any(looks_like_credential(word) for word in parsed.args.split())
        secret = secret or oauth_redirect(parsed.args) is not None
        if command is not None:
            secret = secret or command.carries_secret(parsed.args)
        else:
            # An unknown /mcp… command may be a mistyped /mcp_add with a key in it.
            secret = secret or parsed.name.startswith("mcp")
        return Inbound(normal, parsed, secret, credential_shaped=False)
    shaped = _only_a_credential(normal)
    redirect = None if shaped else oauth_redirect(normal)
    return Inbound(
        normal,
        None,
        carries_secret=shaped or redirect is not None,
        credential_shaped=shaped,
        oauth_redirect=redirect,
    )
