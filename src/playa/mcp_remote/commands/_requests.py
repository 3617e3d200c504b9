"""The arguments of every command but ``/mcp_add``, parsed once into what each handler uses; and,
for the classifier, whether a message of them may carry a secret (each command's ``carries_secret``).

What the host's classifier already found (``CommandContext.args_hold_key``: a key-shaped word in
the arguments) is taken from it, never asked again: it decides what a reply may quote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ...core import CommandContext, holds_key
from ...exceptions import UsageError
from ...mcp import is_server_name
from ..store import DECISIONS, READ_ONLY_MARKS, Decision, decision_of, read_only_of

__all__ = [
    "AUDIT_MAX",
    "AUDIT_SHOWN",
    "AUTH_USAGE",
    "POLICY_USAGE",
    "AuthRequest",
    "PolicyRequest",
    "ServerName",
    "audit_count",
    "auth_carries_secret",
    "key_in",
    "not_a_count",
    "not_a_name",
]

PASTE_FLAG: Final = "--paste"
AUDIT_SHOWN: Final = 20
AUDIT_MAX: Final = 500
_HELP: Final = ("--help", "-h", "help")
POLICY_USAGE: Final = (
    "usage: /mcp_policy lists the policies; /mcp_policy <name> [tool] allow|ask|deny sets one: "
    "allow calls at once, ask waits for your /allow or /deny, deny never offers the tool to the agent; "
    "/mcp_policy <name> [tool] read-only|not-read-only says whether it only reads: data the agent read "
    "elsewhere may then go into it without your decision"
)
AUTH_USAGE: Final = (
    "usage: /mcp_auth <name> to log in; /mcp_auth <name> --paste to send the address a login ended at"
)


def key_in(ctx: CommandContext, word: str) -> bool:
    """Whether ``word`` of the command's arguments holds a key. The classifier's verdict on the
    arguments answers for a word that is all of them, and for any word when none holds a key:
    only a word among arguments that hold one is judged again, alone."""
    if not ctx.args_hold_key:
        return False
    return word == ctx.args.strip() or holds_key(word)


@dataclass(frozen=True, slots=True)
class ServerName:
    """A server name as the owner typed it, and whether it holds a key: then it is never quoted,
    and the reply says it looks like one."""

    text: str
    key: bool

    @classmethod
    def of(cls, ctx: CommandContext, word: str) -> ServerName:
        """``word`` of the command's arguments (see :func:`key_in`)."""
        word = word.strip()
        return cls(word, key_in(ctx, word))

    @property
    def quotable(self) -> bool:
        return not self.key and is_server_name(self.text)

    @property
    def shown(self) -> str:
        return self.text if self.quotable else "that entry"


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """``/mcp_policy <name> [tool] <setting>``: a decision (allow, ask, deny) or a read-only mark."""

    server: ServerName
    tool: str | None
    setting: str
    tool_is_key: bool
    setting_is_key: bool

    @classmethod
    def parse(cls, ctx: CommandContext) -> PolicyRequest | None:
        """The request, or None for the list (no arguments); ``UsageError`` for a wrong count."""
        words = ctx.args.split()
        if not words:
            return None
        if len(words) not in (2, 3):
            raise UsageError(POLICY_USAGE)
        tool = words[1] if len(words) == 3 else None
        tool_is_key = tool is not None and key_in(ctx, tool)
        return cls(ServerName.of(ctx, words[0]), tool, words[-1], tool_is_key, key_in(ctx, words[-1]))

    @property
    def decision(self) -> Decision | None:
        return decision_of(self.setting)

    @property
    def read_only(self) -> bool | None:
        return read_only_of(self.setting)

    def check(self) -> None:
        """Raise ``UsageError`` for a setting that is none, or a key given as the tool's name."""
        if self.decision is None and self.read_only is None:
            quotable = is_server_name(self.setting) and not self.setting_is_key
            shown = f"{self.setting!r} is" if quotable else "That is"
            known = ", ".join((*DECISIONS, *READ_ONLY_MARKS))
            raise UsageError(f"{shown} not a policy: give one of {known}. {POLICY_USAGE}")
        if self.tool_is_key:
            raise UsageError(
                "That looks like a key, not a tool name (not repeated here). /mcp_tools shows them."
            )


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """``/mcp_auth <name>`` (log in), ``<name> --paste`` (ask for the address a login ended at), or
    ``<name> <address>`` (that address)."""

    server: ServerName
    pasted: str | None
    ask_address: bool

    @classmethod
    def parse(cls, ctx: CommandContext) -> AuthRequest:
        name, _, rest = ctx.args.strip().partition(" ")
        if not name:
            raise UsageError(AUTH_USAGE)
        rest = rest.strip()
        if rest and rest != PASTE_FLAG and len(rest.split()) != 1:
            raise UsageError(AUTH_USAGE)
        pasted = rest if rest and rest != PASTE_FLAG else None
        return cls(ServerName.of(ctx, name), pasted, rest == PASTE_FLAG)

    @property
    def login(self) -> bool:
        """Whether it starts a login (no address given or asked for)."""
        return self.pasted is None and not self.ask_address


def audit_count(args: str) -> int:
    """How many records ``/mcp_audit`` shows; ``UsageError`` for anything but 1 to ``AUDIT_MAX``."""
    text = args.strip() or str(AUDIT_SHOWN)
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= AUDIT_MAX:
        raise UsageError(f"usage: /mcp_audit [n], n from 1 to {AUDIT_MAX} (default {AUDIT_SHOWN})")
    return int(text)


# What the classifier asks of each command's arguments (``Command.carries_secret``), besides what
# it asks of every command's (a key-shaped word, ``holds_key``; a login's redirect address): errs
# towards yes, since a message deleted for nothing costs a glance, a key left in the chat the key.
# ``/mcp_policy`` needs nothing more: its name, tool and setting are words, and a key-shaped one is
# the classifier's own finding.


def not_a_name(args: str) -> bool:
    """Whether arguments that should be a server name (or nothing) may be something else: a
    well-formed name that holds a key is the classifier's own finding."""
    args = args.strip()
    return bool(args) and args not in _HELP and not is_server_name(args)


def not_a_count(args: str) -> bool:
    """Whether ``/mcp_audit``'s arguments may be something other than a count (a key, say)."""
    args = args.strip()
    return bool(args) and args not in _HELP and not (args.isascii() and args.isdigit())


def auth_carries_secret(args: str) -> bool:
    """``/mcp_auth <name>`` and ``/mcp_auth <name> --paste`` carry none; a pasted address holds a code."""
    name, _, rest = args.strip().partition(" ")
    return not_a_name(name) or rest.strip() not in ("", PASTE_FLAG)
