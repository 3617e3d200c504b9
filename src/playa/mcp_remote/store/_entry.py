"""One remote MCP server of a chat as the store keeps it: its fields and the rules they obey.

``ServerEntry`` checks every rule at construction, so an entry built by a command and one
opened from the file obey the same ones (the server name's rule has its home in ``playa.mcp``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, get_args
from urllib.parse import urlsplit

from ...core import is_http_token
from ...exceptions import ValidationError
from ...mcp import server_name_problem
from ._grant import OAuthGrant, resource_of
from ._pins import Pins
from ._policy import Policy
from ._read_only import read_only
from ._url import MaskedUrl, mask_url

__all__ = ["AuthKind", "ServerEntry", "TransportChoice"]

TransportChoice = Literal["auto", "streamable-http", "sse"]
"""The transport an entry asks for; ``auto`` tries Streamable HTTP, then SSE."""
AuthKind = Literal["none", "bearer", "headers", "oauth"]

_TRANSPORTS: Final[tuple[str, ...]] = get_args(TransportChoice)
_AUTH_KINDS: Final[tuple[str, ...]] = get_args(AuthKind)
_MAX_URL_CHARS: Final = 2048


@dataclass(frozen=True, repr=False)
class ServerEntry:
    """One remote MCP server of a chat, with its header values in clear (never in ``repr``).

    Construction checks the rules every stored entry obeys and raises ``ValidationError``
    naming the field; messages never quote a header value.
    """

    name: str
    url: str
    transport: TransportChoice = "auto"
    tools: tuple[str, ...] | None = None
    auth_kind: AuthKind = "none"
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    secret_url: bool = False
    """The owner marked every path segment and query value of the URL as secret."""
    oauth: OAuthGrant | None = field(default=None, compare=False, hash=False)
    """The OAuth state of an ``oauth`` entry (None until a login began). Not compared: a
    refreshed token is the same server, and must not make the chat reconnect it."""
    pins: Pins | None = field(default=None, compare=False, hash=False)
    """The tool definitions the owner approved and rejected; None until the first connect
    adopts the server's list. Not compared: a decision must not make the chat reconnect."""
    policy: Policy = field(default_factory=Policy, compare=False, hash=False)
    """The owner's call policies for the server and its tools. Not compared, as the pins."""
    _masked: MaskedUrl = field(init=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_url(self.url)
        object.__setattr__(self, "_masked", mask_url(self.url, secret_url=self.secret_url))
        if self.transport not in _TRANSPORTS:
            raise ValidationError("transport", f"transport must be one of {', '.join(_TRANSPORTS)}")
        if self.tools is not None:
            if not isinstance(self.tools, (tuple, list)):
                raise ValidationError("tools", "tools must be a list of tool names, or null for all")
            tools = tuple(self.tools)
            _check_tools(tools)
            object.__setattr__(self, "tools", tools)
        if self.auth_kind not in _AUTH_KINDS:
            raise ValidationError("auth", f"auth kind must be one of {', '.join(_AUTH_KINDS)}")
        headers = dict(self.headers)
        _check_headers(headers)
        if self.auth_kind == "none" and headers:
            raise ValidationError("auth", "auth kind 'none' cannot carry headers")
        if self.auth_kind == "oauth":
            if headers:
                raise ValidationError("auth", "auth kind 'oauth' cannot carry headers")
            if self.oauth is not None and self.oauth.resource != resource_of(self.url):
                # The grant was made for another server: its tokens must never be sent here.
                raise ValidationError("oauth", "the authorization was granted for another URL")
        elif self.auth_kind != "none" and not headers:
            raise ValidationError("auth", f"auth kind {self.auth_kind!r} needs at least one header")
        if self.oauth is not None and self.auth_kind != "oauth":
            raise ValidationError("oauth", f"auth kind {self.auth_kind!r} cannot carry an authorization")
        # A read-only copy (the caller's dict can change later, the entry must not), in the order
        # the file keeps them: an entry as written and as read back sends its headers alike.
        object.__setattr__(self, "headers", read_only(dict(sorted(headers.items()))))

    @property
    def header_names(self) -> tuple[str, ...]:
        """The names of the headers sent to the server (safe to show)."""
        return tuple(self.headers)

    @property
    def shown_url(self) -> str:
        """The URL with its credentials masked: what the file, replies and the prompt show."""
        return self._masked.shown

    @property
    def secrets(self) -> frozenset[str]:
        """Every credential of the entry: its header values, the secret parts of its URL, and its
        OAuth tokens and client secret."""
        grant = self.oauth.secrets if self.oauth is not None else frozenset()
        return frozenset(self.headers.values()) | self._masked.secrets | grant

    def __repr__(self) -> str:
        return (
            f"ServerEntry(name={self.name!r}, url={self.shown_url!r}, transport={self.transport!r}, "
            f"tools={self.tools!r}, auth_kind={self.auth_kind!r}, header_names={self.header_names!r})"
        )


def _check_name(name: object) -> None:
    if (problem := server_name_problem(name)) is not None:
        raise ValidationError("name", problem)


def _check_url(url: object) -> None:
    if not isinstance(url, str) or not url or len(url) > _MAX_URL_CHARS:
        raise ValidationError("url", f"url must be text of at most {_MAX_URL_CHARS} characters")
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        raise ValidationError("url", "url must be ASCII without spaces or control characters")
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValidationError("url", "url is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise ValidationError("url", "url must be http:// or https:// with a host")


def _check_tools(tools: tuple[object, ...]) -> None:
    seen: set[str] = set()
    for tool in tools:
        if not isinstance(tool, str) or not tool or len(tool) > 128:
            raise ValidationError("tools", "each tool name must be non-empty text of at most 128 characters")
        if tool in seen:
            raise ValidationError("tools", "a tool is listed twice")
        seen.add(tool)


def _check_headers(headers: Mapping[str, object]) -> None:
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not is_http_token(name):
            raise ValidationError("headers", "a header name is not a valid HTTP token")
        if name.lower() in seen:
            raise ValidationError("headers", f"header {name!r} is given twice")
        seen.add(name.lower())
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            # The value is deliberately not quoted: it is a credential.
            raise ValidationError(
                "headers", f"the value of header {name!r} must be text without CR, LF or NUL"
            )
