"""What a chat knows of one of its servers now: the entry, the connection, why it is down, its tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import anyio
import mcp_types
from mcp.client.caching import InMemoryResponseCacheStore

from ..core import Redactor
from .store import OAuthGrant, ServerEntry
from .transport import Connection, GrantStorage

__all__ = ["LoginStart", "RemoteServer"]


@dataclass(eq=False)
class RemoteServer:
    """What the chat knows of one server now."""

    entry: ServerEntry
    status: Literal["connecting", "connected", "unavailable"] = "connecting"
    connection: Connection | None = None
    reason: str | None = None
    """Why it is unavailable, or why its last call dropped the connection: Playa's own words
    (``RemoteError.reason``), which the model's prompt may carry."""
    detail: str | None = None
    """What the server itself said of that failure (``RemoteError.detail``), redacted and cut:
    its words, for the owner's ``/mcp_list`` only, never the prompt."""
    failures: int = 0
    next_retry: float | None = None
    attempt: anyio.Event | None = None
    """Set when the connect attempt in flight ends; None when none is in flight."""
    tools: list[str] = field(default_factory=list)
    """The exposed names of the tools bound to this server."""
    hidden: int = 0
    """How many more tools the server offers beyond the per-server limit."""
    withheld: list[str] = field(default_factory=list)
    """Tools never offered to the model, each with why (safe to show: redacted and cut)."""
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    needs_login: bool = False
    """Unavailable until the owner logs in (``/mcp_auth``): never retried on a timer."""
    refused_logins: int = 0
    """Logins in a row whose token the server then refused for scopes they granted (a 403):
    after the second, another login is no longer suggested (the step-up retry limit)."""
    grant: GrantStorage | None = None
    """An ``oauth`` server's grant as held now (tokens change as they are refreshed)."""
    login: anyio.CancelScope | None = None
    """The owner's login in flight, if any."""
    superseded: OAuthGrant | None = None
    """The grant of the OAuth entry this one replaced (``/mcp_add`` with its name): revoked once
    a new grant is stored, or once the entry connects without needing a login."""
    held: dict[str, mcp_types.Tool] = field(default_factory=dict)
    """New or changed tools held back from the model until the owner decides, by the server's names."""
    approved: dict[str, mcp_types.Tool] = field(default_factory=dict)
    """The approved definitions as last seen live: what a change is shown against."""
    shown: str | None = None
    """The digest of the held tools as the owner was last shown them: only those can be approved."""
    announced: float | None = None
    """When the owner was last sent a message about what waits (the clock's time), while it is
    undecided: the next one waits for the approval interval."""
    transport: str | None = None
    """The transport of the last connection that worked (SSE after a fallback too)."""
    protocol: str | None = None
    """The protocol version agreed on that connection."""
    instructions: str | None = None
    """The server's ``instructions`` the model gets (its own words: untrusted): those of the last
    connection when the owner approved them, else the approved ones (or none)."""
    held_instructions: str | None = None
    """The server's new instructions, held back from the model until the owner decides."""
    instructions_shown: tuple[str | None, Redactor, str] | None = None
    """The instructions as the prompt shows them, with what they were made from."""
    tools_cache: InMemoryResponseCacheStore = field(default_factory=InMemoryResponseCacheStore)
    """Its tool listings, kept as the server allows (``ttlMs``) across this entry's reconnects."""
    quiet_adopt: bool = False
    """Adopting the tool list needs no word to the owner (an ``/mcp_add``, whose reply lists it)."""
    scope: str | None = None
    """The scopes the owner's next login asks for besides those the server names: what a
    request was refused for (403 ``insufficient_scope``) with what was granted before."""

    @property
    def waiting(self) -> bool:
        """Whether changed tools or instructions wait for the owner's decision."""
        return bool(self.held) or self.held_instructions is not None

    @property
    def connecting(self) -> bool:
        return self.attempt is not None and not self.attempt.is_set()


@dataclass(eq=False)
class LoginStart:
    """How the start of an owner's login went, as far as their command waits for it."""

    settled: anyio.Event = field(default_factory=anyio.Event)
    """Set once the link is sent, or the login ended before that."""
    sent: bool = False
    why: str | None = None
    """Why no link went out (redacted), when the login ended before."""
    waiting: bool = True
    """The command still waits: an end before the link goes into its reply, not to ``report``."""
