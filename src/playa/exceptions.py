"""Every error Playa raises, grouped by who has to act on it.

    PlayaError
    ├── UsageError              the chat owner: a command or its input is wrong
    │   └── ValidationError       one field of a server entry failed a rule (``field`` names it)
    ├── ConfigError             the operator: configuration is missing or wrong (also a ValueError)
    ├── ToolError               a tool call could not be made or failed
    │   ├── ToolNotFound          no tool of that name in the chat's registry
    │   ├── ToolInactive          the tool exists but is deactivated
    │   └── ToolUnbound           a remote tool whose server is gone
    ├── WorkspaceError          a workspace path is outside the workspace or unusable
    ├── StoreError              the sealed server file cannot be read or written
    ├── DatabaseError           PostgreSQL cannot be reached, refuses the login, or fails
    └── RemoteError             a remote MCP server or the network failed (``reason``)
        ├── ConnectFailed         connecting, the handshake or the tool listing failed
        │   └── NeedsLogin          an OAuth server needs the owner's login (no retry timer)
        │       └── AccessRefused     it refuses a token for scopes the login granted (403)
        ├── RemoteTimeout         a connect or a call ran out of time
        ├── CallFailed            a call failed in transport (the client is dropped)
        └── SkillRefused          a skill is not what its entry says (digest, size, front matter)

Exceptions of dependencies (the mcp SDK, httpx2, python-telegram-bot) are translated into
these at one seam each and never cross a layer. No message or attribute ever holds a
credential: callers pass redacted text only.
"""

from __future__ import annotations

__all__ = [
    "AccessRefused",
    "CallFailed",
    "ConfigError",
    "ConnectFailed",
    "DatabaseError",
    "NeedsLogin",
    "PlayaError",
    "RemoteError",
    "RemoteTimeout",
    "SkillRefused",
    "StoreError",
    "ToolError",
    "ToolInactive",
    "ToolNotFound",
    "ToolUnbound",
    "UsageError",
    "ValidationError",
    "WorkspaceError",
]


class PlayaError(Exception):
    """Base of every error Playa raises on purpose."""


class UsageError(PlayaError):
    """The chat owner used a command wrongly; the message says how to fix it."""


class ValidationError(UsageError):
    """One field of a server entry failed a rule, from a command or from the stored file."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class ConfigError(PlayaError, ValueError):
    """The operator's configuration is missing or wrong; the message names the setting and the fix.

    Also a ``ValueError``: a setting given in code with a value out of range is one.
    """


class ToolError(PlayaError):
    """A tool call could not be made or failed."""


class ToolNotFound(ToolError):
    """No tool of that name is registered in the chat."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no tool named {name!r}")
        self.name = name


class ToolInactive(ToolError):
    """The tool is registered but deactivated."""

    def __init__(self, name: str) -> None:
        super().__init__(f"tool {name!r} is not active")
        self.name = name


class ToolUnbound(ToolError):
    """A remote tool whose server was removed, or no longer offers it."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"tool {name!r} is no longer available: its server was removed or stopped offering it"
        )
        self.name = name


class WorkspaceError(PlayaError):
    """A path the agent gave is outside its workspace, or the file cannot be used."""


class StoreError(PlayaError):
    """The sealed server file cannot be read or written."""


class DatabaseError(PlayaError):
    """PostgreSQL (``PLAYA_DATABASE_URL``) cannot be reached, refuses the login, or fails a statement.

    ``reason`` is Playa's own short words for the kind of failure ("connection refused",
    "password authentication failed"); ``where`` names the server and database without the
    password; ``sqlstate`` is the server's error code when it answered with one. The driver's
    exception is never chained: its text could quote what was sent.
    """

    def __init__(self, reason: str, *, where: str | None = None, sqlstate: str | None = None) -> None:
        super().__init__(f"PostgreSQL at {where}: {reason}" if where else f"PostgreSQL: {reason}")
        self.reason = reason
        self.where = where
        self.sqlstate = sqlstate

    @property
    def retryable(self) -> bool:
        """Whether the transaction lost a race (serialization failure, deadlock): run it again."""
        return self.sqlstate in ("40001", "40P01")


class RemoteError(PlayaError):
    """A remote MCP server, or the network to it, failed.

    ``reason`` is Playa's own words, short and fixed per kind of failure: "connection refused",
    "timed out after 15 s", "HTTP 401", "the server answered with an error". It is what the
    model's prompt may say of the server. ``detail`` is what the server itself said of it
    (a JSON-RPC error's message, an ``error_description``, where a redirect pointed), or None:
    its words, never the prompt's; the owner sees them, and a tool result (data) carries them.
    """

    def __init__(self, reason: str, *, server: str | None = None, detail: str | None = None) -> None:
        super().__init__(f"{server}: {reason}" if server else reason)
        self.reason = reason
        self.server = server
        self.detail = detail

    @property
    def explained(self) -> str:
        """The reason, followed by what the server said when it said anything: for tool results and the owner."""
        return f"{self.reason} (the server said: {self.detail})" if self.detail else self.reason


class ConnectFailed(RemoteError):
    """Connecting, the MCP handshake or the tool listing failed."""


class NeedsLogin(ConnectFailed):
    """An OAuth server cannot be connected until the owner logs in (``/mcp_auth``).

    ``reason`` is "this server needs a login" or "authorization expired". Retrying on a
    timer cannot help, so nothing does.
    """


class AccessRefused(NeedsLogin):
    """An OAuth server refuses a token for the very scopes the login granted (403 ``insufficient_scope``).

    No scope is missing, so no step-up can be asked for; a timer cannot change the server's
    mind either. A new login may (the account's access may have changed), once.
    """


class RemoteTimeout(RemoteError):
    """A connect or a call did not finish in time."""


class CallFailed(RemoteError):
    """A tool call failed in transport; the server's client was dropped."""


class SkillRefused(RemoteError):
    """A server's skill (the skills extension) is not what its entry says, or breaks the extension's rules.

    Nothing of it reaches the model; ``reason`` says what was wrong, in Playa's words.
    """
