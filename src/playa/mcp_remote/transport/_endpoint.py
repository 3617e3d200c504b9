"""What a connection is to: the operator's settings for every connection, and one server's endpoint.

Also the redaction of what a server says back in an error: with the endpoint's credentials
removed, cut to a reason's length, and the exception chain cut when it could carry a credential.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ...core import Redactor, check_at_least
from ...exceptions import RemoteError
from ..store import TransportChoice
from ._egress import EgressPolicy
from ._errors import MAX_REASON
from ._oauth import ServerAuth
from ._seconds import check_seconds

__all__ = ["ConnectionSettings", "Endpoint", "TransportName", "redacted", "redactor_of", "safe_cause"]

TransportName = Literal["streamable-http", "sse"]

_E = TypeVar("_E", bound=RemoteError)


@dataclass(frozen=True, kw_only=True)
class ConnectionSettings:
    """The operator's settings for every remote MCP connection of a host.

    ``connect_timeout`` bounds connecting, the handshake and the tool listing together;
    ``call_timeout`` is the default bound of one tool call, counted again from each progress
    notification of the call, but never past ``call_max`` from its start (a task the server
    still runs after ``call_timeout`` is followed on in the background up to ``call_max``
    too); ``close_timeout`` bounds closing a
    connection (a frozen server must not hold up a disconnect); ``trust_env`` lets httpx2 read
    proxies, ``.netrc`` and CA bundles from the environment; ``max_tool_pages`` bounds the
    paginated tool listing.

    ``egress`` says which addresses may be reached (see ``EgressPolicy``; with ``public`` no
    proxy is used, since a proxy would connect out of the policy's reach). ``max_result_bytes``
    bounds one answer of a server, decoded: a larger tool result fails the call with a clear
    reason and is never held whole (see ``_budget``; over SSE the SDK's 1 MiB per event applies
    when it is lower).
    """

    connect_timeout: float = 15.0
    call_timeout: float = 60.0
    call_max: float = 900.0
    close_timeout: float = 2.0
    trust_env: bool = False
    max_tool_pages: int = 100
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    max_result_bytes: int = 4 * 1024 * 1024
    max_concurrent_connects: int = 32
    """Connects in flight at once per connector; more wait their turn, and their connect timeout
    starts when they leave the queue. Without it, a host starting a thousand chats spends its CPU
    on connects that all time out together."""

    def __post_init__(self) -> None:
        check_seconds(
            self,
            ("connect_timeout", "call_timeout", "call_max", "close_timeout"),
            floor="call_timeout",
            ceiling="call_max",
        )
        check_at_least(self, max_concurrent_connects=1, max_tool_pages=1, max_result_bytes=1024)


def _display_url(url: str) -> str:
    """The URL without userinfo, query or fragment, which may carry credentials."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """What to connect to: the server's name in the chat, its URL, transport and headers.

    The headers' values are credentials: ``repr`` shows their names only. ``auth`` is the
    OAuth provider of an ``oauth`` server (one per connect: see ``ServerAuth``).
    """

    server: str
    url: str
    transport: TransportChoice = "auto"
    headers: Mapping[str, str] = field(default_factory=dict)
    url_secrets: frozenset[str] = frozenset()
    """Credentials inside ``url`` (a key in the query or path, a password): redacted like headers."""
    auth: ServerAuth | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # A read-only copy: the caller's dict may change later, this endpoint must not.
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))
        object.__setattr__(self, "url_secrets", frozenset(self.url_secrets))

    @property
    def secrets(self) -> frozenset[str]:
        """Every credential the endpoint sends: header values, URL secrets, and the OAuth tokens
        and client secret held now."""
        grant = self.auth.grant.secrets if self.auth is not None else frozenset()
        return frozenset(self.headers.values()) | self.url_secrets | grant

    def __repr__(self) -> str:
        url = (
            redactor_of(self.url_secrets).redact(_display_url(self.url))
            if self.url_secrets
            else _display_url(self.url)
        )
        return (
            f"Endpoint(server={self.server!r}, url={url!r}, "
            f"transport={self.transport!r}, headers={sorted(self.headers)!r}, oauth={self.auth is not None})"
        )


def redactor_of(secrets: frozenset[str]) -> Redactor:
    """A redactor of an endpoint's credentials, for its errors and its ``repr``.

    Built each time, never cached by the values: a cache would keep a closed chat's credentials
    in memory. A connected endpoint's are held by its chat, so their forms are derived already
    and a build costs microseconds.
    """
    return Redactor(secrets)


def redacted(error: _E, endpoint: Endpoint) -> _E:
    """``error`` with the endpoint's header values removed from its reason and detail, each then cut.

    A server's error text may quote what it received, credentials included; reasons reach
    logs, replies and the model's prompt, details the owner and tool results.
    """
    reason = _redacted_text(error.reason, endpoint)
    detail = _redacted_text(error.detail, endpoint) if error.detail is not None else None
    if reason is error.reason and detail is error.detail:
        return error
    return type(error)(reason, server=error.server, detail=detail)


def _redacted_text(text: str, endpoint: Endpoint) -> str:
    if secrets := endpoint.secrets:
        text = redactor_of(secrets).redact(text)
    if len(text) > MAX_REASON:
        # Cut only once redacted: a cut first could keep the head of a quoted credential.
        text = text[: MAX_REASON - 1] + "…"
    return text


def safe_cause(error: RemoteError, cause: BaseException | None, endpoint: Endpoint) -> BaseException | None:
    """The cause to chain, unless its text holds a credential (then the chain is cut)."""
    if cause is None or not (secrets := endpoint.secrets):
        return cause
    text = "".join(traceback.format_exception(cause))
    # With OAuth the chain is always cut: a refresh or token exchange may carry secrets that
    # are known only once the flow is done.
    return None if endpoint.auth is not None or redactor_of(secrets).contains(text) else cause
