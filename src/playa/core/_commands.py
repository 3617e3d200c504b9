"""Chat commands: ``/name args`` messages the host handles before, and instead of, the agent."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._tools import Media
from ._ui import UI, Sender

if TYPE_CHECKING:
    from ._session import ChatSession

__all__ = [
    "Command",
    "CommandContext",
    "CommandReply",
    "CommandRouter",
    "ParsedCommand",
    "beside_a_question",
    "parse_command",
]

# A command is a first word of the form /name or /name@botname (Telegram). Anything that
# starts with /mcp is taken whatever follows, because a mistyped `/mcp-add … --bearer KEY`
# must not reach the model.
_COMMAND = re.compile(r"/(?P<name>[A-Za-z0-9_]{1,64})(?:@[A-Za-z0-9_]{1,64})?(?=\s|$)")
_MCP_PREFIX = "/mcp"


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """A message recognised as a command: its lower-cased name and the text after it."""

    name: str
    args: str

    def __repr__(self) -> str:
        return f"ParsedCommand({self.name!r}, {len(self.args)} chars of arguments)"

    @property
    def wants_help(self) -> bool:
        """``/name --help`` (or ``-h``, ``help``): the command's usage is shown, the command not run."""
        return self.args in ("--help", "-h", "help")


def parse_command(text: str) -> ParsedCommand | None:
    """The command in a message, or ``None`` when the message is for the agent."""
    stripped = text.lstrip()
    match = _COMMAND.match(stripped)
    if match:
        return ParsedCommand(match["name"].lower(), stripped[match.end() :].strip())
    if stripped[: len(_MCP_PREFIX)].lower() == _MCP_PREFIX:
        head, _, rest = stripped.partition(" ")
        return ParsedCommand(head[1:].lower(), rest.strip())
    return None


@dataclass(frozen=True, slots=True)
class CommandReply:
    """What a command answers. Command replies never enter the history."""

    text: str


@dataclass(slots=True)
class CommandContext:
    """Everything a command handler may use."""

    session: ChatSession
    sender: Sender
    args: str
    ui: UI
    args_hold_key: bool = field(kw_only=True)
    """Whether a word of ``args`` looks like a key: the classifier's finding (``Inbound``), so a
    handler never quotes it, and need not ask again."""
    turn: Callable[[str, tuple[Media, ...]], Awaitable[str]] | None = field(default=None, kw_only=True)
    """Runs an agent turn of this text (and media) as the sender's message, and returns the text of
    its reply; set by the host (None where no agent answers)."""

    @property
    def is_owner(self) -> bool:
        return self.sender.is_owner


Handler = Callable[[CommandContext], Awaitable[str]]


def _never(_args: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Command:
    """A ``/name`` command.

    ``carries_secret`` tells from the raw arguments whether the message holds a credential,
    so the front end deletes it before anything else happens. ``read_only``: it only shows
    what is (it changes nothing), so it runs at once while a question waits in the chat; for a
    command that shows or changes by its arguments, a function telling from them which it does.
    """

    name: str
    summary: str
    handler: Handler
    usage: str = ""
    owner_only: bool = True
    carries_secret: Callable[[str], bool] = field(default=_never)
    read_only: bool | Callable[[str], bool] = False

    @property
    def help(self) -> str:
        lines = [f"/{self.name} — {self.summary}"]
        if self.usage:
            lines.append(self.usage)
        return "\n".join(lines)


class CommandRouter:
    """The commands of a host, by name."""

    def __init__(self, commands: Iterable[Command] = ()) -> None:
        self._commands: dict[str, Command] = {}
        for command in commands:
            self.add(command)

    def add(self, command: Command) -> None:
        name = command.name.lower()
        if not _COMMAND.fullmatch(f"/{name}"):
            raise ValueError(f"invalid command name {command.name!r}")
        if name in self._commands:
            raise ValueError(f"command /{name} is already registered")
        self._commands[name] = command

    def get(self, name: str) -> Command | None:
        return self._commands.get(name.lower())

    def all(self) -> list[Command]:
        return sorted(self._commands.values(), key=lambda c: c.name)

    def help_text(self, *, for_owner: bool = True) -> str:
        lines = ["Commands:"]
        for command in self.all():
            if command.owner_only and not for_owner:
                continue
            lines.append(f"/{command.name} — {command.summary}")
        lines.append("Anything else goes to the agent.")
        return "\n".join(lines)


def beside_a_question(parsed: ParsedCommand, commands: CommandRouter, *, is_owner: bool) -> bool:
    """Whether a command runs at once while a question waits in the chat, beside it.

    Those that change nothing do: a ``read_only`` command (``/help``, ``/mcp_list`` …), a
    command's own help, an unknown command, and one only the owner may run sent by someone else
    (it is refused). Any other command changes the chat, so it keeps its place after what came
    before it: the question is cancelled (``cancelled_for``) so that the chat can reach it.
    """
    command = commands.get(parsed.name)
    if command is None or parsed.wants_help:
        return True
    if command.read_only(parsed.args) if callable(command.read_only) else command.read_only:
        return True
    return command.owner_only and not is_owner
