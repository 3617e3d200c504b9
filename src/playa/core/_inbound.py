"""The one inbound classifier: what a chat message is, before anything else sees it.

Every front end and the host ask the same question of every message — is it a command, does it
hold a credential, may it reach the model — and get the same answer from :func:`classify`. The
text is normalized first, so that tricks that hide a command from a naive check (a zero-width
space or a byte-order mark before the slash, a fullwidth or division slash) do not turn a
``/mcp_add … --bearer KEY`` into an ordinary message for the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs

from ._commands import ParsedCommand, parse_command
from ._normalize import normalize
from .secrets import holds_key, mask_known_keys, only_a_credential

if TYPE_CHECKING:
    from ._commands import CommandRouter

__all__ = ["Inbound", "classify", "oauth_redirect"]


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
    args_hold_key: bool = False
    """A word of the command's arguments looks like a key (``holds_key``): what the command's
    handler is told (``CommandContext.args_hold_key``), so it quotes none of them."""

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
        keyed = holds_key(parsed.args)
        secret = keyed or oauth_redirect(parsed.args) is not None
        if command is not None:
            secret = secret or command.carries_secret(parsed.args)
        else:
            # An unknown /mcp… command may be a mistyped /mcp_add with a key in it.
            near = _near_command(normal, commands)
            secret = (
                secret or parsed.name.startswith("mcp") or (near is not None and _carries_key(near, commands))
            )
            return Inbound(normal, parsed, secret, False, near_command=near[0] if near else None)
        return Inbound(normal, parsed, secret, credential_shaped=False, args_hold_key=keyed)
    shaped = only_a_credential(normal)
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
