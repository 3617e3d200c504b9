"""The one seam where errors of the mcp SDK and httpx2 become Playa's ``RemoteError`` family.

The SDK reports failures in several shapes: ``ExceptionGroup``s (nested) out of its task
groups, bare httpx2 errors, and ``MCPError``s, some sent by the server and some made up by the
transport for an HTTP failure (a 401 becomes "-32603 Server returned an error response").
So the HTTP client of each connection carries an ``HttpTrace`` response hook that keeps the
status codes the SDK drops, and the reasons here say what a person can act on: "HTTP 401
(unauthorized)", "connection refused", "timed out after 15 s". A reason never holds a header
value, a query string or userinfo.

A reason is Playa's own words only, fixed per kind of failure: the model's prompt says it of
the server every turn, and the system prompt carries more authority than a tool result. What
the server said of the failure (a JSON-RPC error's message, an ``error_description``, a short
error body, where a redirect pointed) is its ``detail``, kept apart: for the owner and for
tool results.
"""

from __future__ import annotations

import errno
import re
import socket
import ssl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import anyio
import httpx2
import pydantic
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)

from ...core import one_line
from ...exceptions import CallFailed, ConnectFailed, RemoteError, RemoteTimeout

__all__ = [
    "MAX_REASON",
    "ConnectFailure",
    "HttpTrace",
    "call_error",
    "challenge_description",
    "connect_error",
    "error_body",
    "missing_scope",
    "needs_scope",
    "refused_although_granted",
    "server_words",
    "timed_out",
]

MAX_REASON: Final = 300
"""Characters of a failure's reason, and of the server's words on it, that anyone is shown (after redaction)."""
ANSWERED: Final = "the server answered with an error"
"""The reason of a JSON-RPC error the server sent; its code and message are the error's ``detail``."""
_SDK_PARSE_FAILURES: Final = ("Failed to parse JSON response", "Failed to parse SSE message")
# The SDK's own stand-ins for a stream that ended, all with code -32000.
_SDK_TIMEOUT: Final = re.compile(r"Request '[^']*' timed out")
_SDK_CLOSED: Final = ("Connection closed", "SSE stream ended without a response", "SSE stream failed")
# The SDK's stand-ins for an HTTP error status whose body held no JSON-RPC error.
_SDK_STATUS_STAND_INS: Final = frozenset(
    {
        (INTERNAL_ERROR, "Server returned an error response"),
        (METHOD_NOT_FOUND, "Not Found"),
        (INVALID_REQUEST, "Session terminated"),
    }
)
# Statuses that say more of the connection than a JSON-RPC error in their body: the server
# refuses these credentials (401, 403, 407), or forgot the session (404, mid-session).
_STATUS_FIRST: Final = frozenset({401, 403, 404, 407})

# Statuses that say the server is there and speaks HTTP, but refuses this client: the other
# transport would be refused the same way, so they never trigger a transport fallback.
_NO_FALLBACK_STATUSES: Final = frozenset({401, 403, 407, 429})

_SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,64}")
"""A scope token (RFC 6749 §3.3): printable ASCII without space, quote or backslash; and short."""
_SCOPES_SHOWN: Final = 5
_BODY_READ: Final = 4096
"""The largest error body (by its announced length) kept as the server's words."""
_BODY_TYPES: Final = ("text/plain", "application/json", "application/problem+json")

_STATUS_NOTES: Final = {
    400: "bad request",
    401: "unauthorized: check the credentials",
    403: "forbidden",
    404: "not found: not an MCP endpoint",
    405: "method not allowed: not an MCP endpoint",
    406: "not acceptable: not an MCP endpoint",
    407: "proxy authentication required",
    429: "too many requests",
}


def server_words(text: str) -> str:
    """A server's own text on one line: format characters (zero-width, bidirectional) gone, other
    control characters and line breaks spaces, runs of spaces one.

    Not redacted and not cut: the connection's seam does both, in that order
    (``_connection._redacted``). Without its format characters, a key split by a zero-width
    space is whole again for the redactor; the whole text, never a slice, is cleaned, as a
    slice could end inside a key.
    """
    return one_line(text)


def missing_scope(response: httpx2.Response) -> str | None:
    """What a 403 ``insufficient_scope`` challenge (RFC 6750 §3.1) says is missing; None for any other response.

    "needs scope files:write" from the challenge's ``scope``. The server chose it: only scope
    tokens are named; anything else is "needs a scope the login did not grant", and the
    server's ``error_description`` is never part of it (``challenge_description`` has it).
    """
    if response.status_code != 403 or extract_field_from_www_auth(response, "error") != "insufficient_scope":
        return None
    scopes = (extract_field_from_www_auth(response, "scope") or "").split()
    if scopes and all(_SCOPE_TOKEN.fullmatch(token) for token in scopes):
        return needs_scope(scopes)
    return "needs a scope the login did not grant"


def challenge_description(response: httpx2.Response) -> str | None:
    """The ``error_description`` of an error response's Bearer challenge (RFC 6750 §3), on one line; None without one.

    The server's own words: the caller's to redact before it cuts them (``_connection._redacted``).
    """
    if response.status_code < 400:
        return None
    return server_words(extract_field_from_www_auth(response, "error_description") or "") or None


def needs_scope(scopes: Sequence[str]) -> str:
    """A refusal for want of ``scopes``, as "needs scope files:write, repo".

    Fit for a reply and the prompt section that carries it every turn: a server chose the
    scopes, so only short scope tokens are named, five at most.
    """
    shown = _scope_list(scopes)
    return f"needs scope {shown}" if shown else "needs a scope the login did not grant"


def refused_although_granted(scopes: Sequence[str]) -> str:
    """A 403 ``insufficient_scope`` for ``scopes`` the token holds already: the server's refusal.

    Named as ``needs_scope`` names them; no new scope can be asked for, so no login is known to help.
    """
    shown = _scope_list(scopes)
    reason = "the server refused access (403) although the login granted the scopes it asked for"
    return f"{reason}: {shown}" if shown else reason


def _scope_list(scopes: Sequence[str]) -> str:
    """The scope tokens among ``scopes``, five at most, as "files:write, repo"; "" when there are none."""
    shown = [scope for scope in scopes if _SCOPE_TOKEN.fullmatch(scope)][:_SCOPES_SHOWN]
    if not shown:
        return ""
    more = len(scopes) - len(shown)
    return ", ".join(shown) + (f", and {more} more" if more else "")


class HttpTrace:
    """Response hook for one connection's HTTP client: remembers what the SDK does not report.

    ``errors`` counts responses with a status of 400 or more, ``status`` is the last of them;
    ``redirect`` is where the last redirect pointed (scheme, host, port and path only).
    """

    def __init__(self) -> None:
        self.errors = 0
        self.status: int | None = None
        self.redirect: str | None = None
        self.login_challenge = False
        """A 401 came with a Bearer or DPoP challenge (RFC 6750, 9449): an OAuth login can get the token, its
        authorization server found from the metadata the challenge names or the well-known
        paths (RFC 9728, RFC 8414), or at the 2025-03-26 default endpoints. It stays set: a
        client that falls back to another request after it (``server/discover`` refused, then
        ``initialize``) ends on that request's status."""
        self.missing_scope: str | None = None
        """What the last refusal said is missing, when it was a 403 ``insufficient_scope`` (``missing_scope``)."""
        self.description: str | None = None
        """The last error response's ``error_description`` (``challenge_description``): the server's words."""
        self.body: str | None = None
        """The last error response's body, when it was short plain text or JSON (``error_body``): the server's words."""

    async def on_response(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.errors += 1
            self.status = response.status_code
            self.missing_scope = missing_scope(response)
            self.description = challenge_description(response)
            self.body = await error_body(response)
            if response.status_code == 401:
                words = response.headers.get("www-authenticate", "").split(None, 1)
                # RFC 6750's Bearer, or RFC 9449's DPoP: both are OAuth access tokens.
                if words and words[0].rstrip(",").lower() in ("bearer", "dpop"):
                    self.login_challenge = True
        elif 300 <= response.status_code < 400 and (location := response.headers.get("location")):
            try:
                target = response.request.url.join(location)
            except httpx2.InvalidURL:
                return
            self.redirect = str(target.copy_with(userinfo=b"", query=None, fragment=None))


async def error_body(response: httpx2.Response) -> str | None:
    """An error response's body on one line, when it is short plain text or JSON; None for anything else.

    The server's own words. Read only when its length is announced, small and not compressed:
    the read is bounded by that length (the result budget has not wrapped the stream yet), and
    the SDK reads the same bytes again from memory. A body that fails to arrive is no reason.
    """
    headers = response.headers
    length = headers.get("content-length", "")
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if not length.isdigit() or int(length) > _BODY_READ or encoding not in ("", "identity"):
        return None
    if kind not in _BODY_TYPES:
        return None
    try:
        content = await response.aread()
    except httpx2.HTTPError:
        return None
    return server_words(content.decode("utf-8", errors="replace")) or None


@dataclass(frozen=True, slots=True)
class ConnectFailure:
    """A translated connect failure, and whether the other transport is worth a try."""

    error: ConnectFailed | RemoteTimeout
    try_other_transport: bool


@dataclass(frozen=True, slots=True)
class _Failure:
    reason: str
    # timeout, network, closed (the server went away), refused (auth, redirect: no fallback),
    # rejected (a 4xx or no event stream: fallback), server (5xx), answered (a JSON-RPC error
    # the server sent), invalid (a response that breaks the protocol), unknown.
    kind: str
    detail: str | None = None
    """What the server said of it, on one line (``server_words``): not redacted, not cut."""


def exception_tree(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception inside it: group members, causes and contexts, each once."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(linked for linked in (current.__cause__, current.__context__) if linked is not None)


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _status_reason(
    status: int, redirect: str | None = None, scope: str | None = None, detail: str | None = None
) -> _Failure:
    if 300 <= status < 400:
        # Where it pointed is the server's choice, a path of its words: the detail.
        where = f"Location: {redirect}" if redirect else None
        return _Failure("redirected to another URL, not followed", "refused", where)
    note = _STATUS_NOTES.get(status, "server error" if status >= 500 else "")
    if status == 403 and scope is not None:
        note = f"{note}: {scope}"
    reason = f"HTTP {status} ({note})" if note else f"HTTP {status}"
    if status >= 500:
        return _Failure(reason, "server", detail)
    return _Failure(reason, "refused" if status in _NO_FALLBACK_STATUSES else "rejected", detail)


_NETWORK_CAUSES: Final[tuple[tuple[type[BaseException], _Failure], ...]] = (
    # In this order: a certificate error is an SSL error too.
    (ssl.SSLCertVerificationError, _Failure("TLS certificate not trusted", "network")),
    (ssl.SSLError, _Failure("TLS handshake failed", "network")),
    (socket.gaierror, _Failure("host not found", "network")),
    (ConnectionRefusedError, _Failure("connection refused", "network")),
)
"""What a cause inside a transport error says, the first that matches."""
_TRANSPORT_ERRORS: Final[tuple[tuple[type[httpx2.TransportError], _Failure], ...]] = (
    (httpx2.TimeoutException, _Failure("timed out", "timeout")),
    (httpx2.ConnectError, _Failure("could not connect", "network")),
    (httpx2.SSEError, _Failure("not an MCP endpoint (no event stream)", "rejected")),
    (httpx2.ProxyError, _Failure("proxy error", "network")),
)
"""What a transport error says when none of its causes does, the first that matches."""


def _network_reason(exc: httpx2.TransportError) -> _Failure:
    for cause in _causes(exc):
        for kind, failure in _NETWORK_CAUSES:
            if isinstance(cause, kind):
                return failure
        if isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return _Failure("host unreachable", "network")
    for error, failure in _TRANSPORT_ERRORS:
        if isinstance(exc, error):
            return failure
    return _Failure("server closed the connection", "closed")


def _mcp_reason(exc: MCPError, trace: HttpTrace, *, http_failed: bool) -> _Failure:
    if exc.code == REQUEST_TIMEOUT and _SDK_TIMEOUT.fullmatch(exc.message) and exc.data is None:
        # The SDK's own error for a request it gave up on; a server's -32001 is its answer.
        return _Failure("timed out", "timeout")
    if exc.code == INVALID_REQUEST and exc.message.startswith("Redirect to "):
        return _status_reason(307, trace.redirect)
    answer = _answer(exc)
    if http_failed and trace.status is not None:
        status = trace.status
        if answer is not None and 400 <= status < 500 and status not in _STATUS_FIRST:
            # A JSON-RPC error in the body of a 4xx (the SDK's server answers so a request it
            # cannot serve, such as a question in the stateless protocol): the server's answer,
            # over a connection that works.
            return answer
        detail = trace.description or (answer.detail if answer is not None else None) or trace.body
        return _status_reason(status, scope=trace.missing_scope, detail=detail)
    if exc.code == CONNECTION_CLOSED and exc.message.startswith(_SDK_CLOSED) and exc.data is None:
        # The SDK's stand-in for a stream that ended. A server may answer with -32000 as
        # well (JSON-RPC leaves it to servers): that is the server's error, and the connection
        # that carried it works.
        return _Failure("server closed the connection", "closed")
    if exc.code == PARSE_ERROR and exc.message.startswith(_SDK_PARSE_FAILURES):
        # The SDK's stand-in for a response it could not read (invalid JSON, not JSON-RPC):
        # the server sent no such error, and the other transport would not read it better.
        return _Failure("invalid response from the server", "invalid")
    return answer or _Failure(ANSWERED, "answered", f"error {exc.code}")


def _answer(exc: MCPError) -> _Failure | None:
    """A JSON-RPC error the server sent, as a failure; None for the SDK's stand-in for an HTTP status.

    Its message is the server's text, as trusted as a tool result: the detail, never the reason.
    Not cut here: a cut before redaction could leave the head of a quoted credential. The
    connection's seam redacts, then cuts (``_connection._redacted``).
    """
    if exc.data is None and (exc.code, exc.message) in _SDK_STATUS_STAND_INS:
        return None
    message = server_words(exc.message)
    return _Failure(ANSWERED, "answered", f"error {exc.code}: {message}" if message else f"error {exc.code}")


def _describe(leaf: BaseException, trace: HttpTrace, *, http_failed: bool) -> _Failure:
    if isinstance(leaf, TimeoutError):
        return _Failure("timed out", "timeout")
    if isinstance(leaf, httpx2.HTTPStatusError):
        response = leaf.response
        detail = challenge_description(response) or trace.body
        return _status_reason(response.status_code, trace.redirect, missing_scope(response), detail)
    if isinstance(leaf, httpx2.TransportError):
        return _network_reason(leaf)
    if isinstance(leaf, MCPError):
        return _mcp_reason(leaf, trace, http_failed=http_failed)
    if isinstance(leaf, pydantic.ValidationError):
        return _Failure("invalid response from the server", "invalid")
    if isinstance(leaf, (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream)):
        return _Failure("server closed the connection", "closed")
    if isinstance(leaf, RuntimeError):
        # The SDK raises RuntimeError for protocol violations: an unsupported protocol version,
        # structured content that does not match the tool's output schema.
        return _Failure("the server broke the MCP protocol", "invalid")
    return _Failure(f"unexpected error ({type(leaf).__name__})", "unknown")


_PRIORITY: Final = {
    "timeout": 0,
    "network": 1,
    "refused": 2,
    "server": 2,
    "rejected": 3,
    "answered": 3,
    "invalid": 4,
    "unknown": 5,
    "closed": 6,
}


def _pick(exc: BaseException, trace: HttpTrace, *, http_failed: bool) -> _Failure:
    """The failure that best explains ``exc``: a root cause beats the "connection closed" it led to."""
    cancelled = anyio.get_cancelled_exc_class()
    failures = [
        _describe(leaf, trace, http_failed=http_failed)
        for leaf in _leaves(exc)
        if not isinstance(leaf, cancelled)
    ]
    if not failures:
        return _Failure("cancelled", "closed")
    return min(failures, key=lambda failure: _PRIORITY[failure.kind])


def timed_out(seconds: float, *, server: str) -> RemoteTimeout:
    """The error for a connect or a call that ran out of its ``seconds``."""
    return RemoteTimeout(f"timed out after {_seconds(seconds)}", server=server)


def connect_error(exc: BaseException, *, server: str, trace: HttpTrace, timeout: float) -> ConnectFailure:
    """Translate what failed while connecting, handshaking or listing tools.

    ``try_other_transport`` is true when the server was reached and rejected this transport
    (a 4xx other than an auth failure, a JSON-RPC error, no event stream), which is how a
    server that speaks only the other transport answers. ``timeout`` is the connect timeout,
    named in the reason of a timeout.
    """
    failure = _pick(exc, trace, http_failed=trace.errors > 0)
    if failure.kind == "timeout":
        return ConnectFailure(timed_out(timeout, server=server), try_other_transport=False)
    return ConnectFailure(
        ConnectFailed(failure.reason, server=server, detail=failure.detail),
        try_other_transport=failure.kind in ("rejected", "answered"),
    )


def call_error(
    exc: BaseException, *, server: str, trace: HttpTrace, errors_before: int, timeout: float
) -> RemoteError:
    """Translate what failed during a tool call.

    ``CallFailed`` and ``RemoteTimeout`` are transport failures (the connection is no longer
    to be trusted); a plain ``RemoteError`` is an error the server answered with, over a
    connection that still works. ``errors_before`` is ``trace.errors`` when the call began;
    ``timeout`` is the call's timeout, named in the reason of a timeout.
    """
    failure = _pick(exc, trace, http_failed=trace.errors > errors_before)
    if failure.kind == "timeout":
        return timed_out(timeout, server=server)
    if failure.kind in ("answered", "invalid"):
        return RemoteError(failure.reason, server=server, detail=failure.detail)
    if failure.reason.startswith("HTTP 404"):
        # Mid-session, a 404 means the server forgot the session (it restarted, or expired it).
        return CallFailed("session expired (HTTP 404)", server=server, detail=failure.detail)
    return CallFailed(failure.reason, server=server, detail=failure.detail)
