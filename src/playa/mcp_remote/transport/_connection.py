"""Connections to remote MCP servers: connect (Streamable HTTP, SSE fallback), list tools, call, close.

A ``Connector`` holds what all connections of a host share: the settings, one SSL context, and
for each URL the transport and protocol its server spoke last. ``Connector.connect`` returns a
``Connection`` whose tools are already listed. Each connection lives in a task of the caller's
task group, which enters the SDK's transport and session and exits them again (anyio cancel
scopes must be exited by the task that entered them); ``Connection.aclose`` asks that task to
stop and waits for it.

The protocol: over Streamable HTTP the first connect to a URL lets the SDK negotiate
(``mode="auto"``): it asks ``server/discover``; a server of the 2026 protocol answers with the
versions it speaks, and an older one refuses the method and gets the ``initialize`` handshake
instead. Later connects to that URL start with what was agreed: a modern version needs no
handshake at all (the tool listing is the first request, and there is no session to open or
delete) for as long as the server's ``server/discover`` answer says it stays fresh (its
``ttlMs``: what it says, its ``instructions`` included, is reused only that long, and probed
again after), and the handshake goes without the probe. Should the server have changed, the
remembered way fails with the server's answer and the same connect negotiates again; a probe
that gets no answer in time leaves the handshake for next time, since a server that ignores
the probe would otherwise time out on every connect. (A server that was only down is then
spoken to with the handshake until it refuses it; one that speaks both protocols never does.)
SSE, the older transport, always uses the handshake.

A transport failure or a timeout during a call marks the connection ``broken`` and stops it; its
owner drops it and connects again for the next call. Calls are never retried here.

A call's time: ``call_timeout`` seconds, counted again from each progress notification the
server sends for it, but never past ``call_max`` seconds from its start; a question the server
asks a person stops the clock while the person answers. A tool that runs only as a task (see
``_tasks``) is called as one: the call follows the task until its time is up, and then hands
back a ``PendingTask`` that ``finish_task`` follows on, up to ``call_max``.

Tool-list changes are followed while connected: a 2025-11-25 server sends
``notifications/tools/list_changed`` (on the listening stream, or SSE's one stream); a 2026-07-28
server sends it on a ``subscriptions/listen`` stream the connection opens when the server
offers it. Either way the connection lists the tools again and hands the new list to its
owner's ``on_tools``.

A tools/list result is kept as its 2026-07-28 ``ttlMs`` and ``cacheScope`` allow, in the
response cache its owner hands each connection of one server (``tools_cache``): a reconnect
within the time needs no listing. A change the server announces evicts it, and the listing
after a change always asks the server.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import ssl
import traceback
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, NoReturn, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import mcp_types
from anyio.abc import TaskGroup, TaskStatus
from mcp.client import Client
from mcp.client import Transport as ClientTransport
from mcp.client.caching import CacheConfig, CacheMode, ResponseCacheStore
from mcp.client.session import ClientRequestContext
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ... import __version__
from ...core import Redactor
from ...exceptions import (
    AccessRefused,
    CallFailed,
    ConfigError,
    ConnectFailed,
    NeedsLogin,
    RemoteError,
    RemoteTimeout,
)
from ..store import TransportChoice
from ._budget import SSE_TRANSPORT_EVENT_LIMIT, ResultBudget, format_size, oversized_event, too_large_reason
from ._egress import EgressPolicy, Resolver, find_refusal, guarded_transport
from ._elicit import Ask, Refused, elicit_result, to_question
from ._errors import MAX_REASON, ConnectFailure, HttpTrace, call_error, connect_error, timed_out
from ._oauth import ServerAuth
from ._result_type import complete_by_default
from ._tasks import (
    TERMINAL,
    PendingTask,
    cancel_task,
    create_task,
    get_task,
    poll_seconds,
    task_required,
    task_result,
    unrunnable_reason,
)

__all__ = [
    "Connection",
    "ConnectionSettings",
    "Connector",
    "Endpoint",
    "PendingTask",
    "Progress",
    "ProgressReport",
    "TransportName",
]

logger = logging.getLogger(__name__)

TransportName = Literal["streamable-http", "sse"]

NEGOTIATE: Final = "auto"
"""The SDK's connect mode that probes ``server/discover`` and falls back to the handshake."""
HANDSHAKE: Final = "legacy"
"""The SDK's connect mode of the ``initialize`` handshake; any other mode is a modern version."""

# A response stream (a long tool call, the SSE event stream) may stay quiet this long between
# chunks before httpx2 gives up on it; the call timeout bounds calls on its own.
_STREAM_READ_TIMEOUT: Final = 300.0
_LISTENING_WAIT: Final = 5.0
"""Seconds a new session waits for its listening stream to be answered before it is reported
connected; a server slower than that to open it is used all the same."""
_CLIENT_INFO: Final = mcp_types.Implementation(name="playa", version=__version__)


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a call has come, as the server reports it: a progress notification, or a task's state."""

    progress: float | None = None
    total: float | None = None
    message: str | None = None
    """The server's words (not redacted: whoever shows them redacts them)."""


ProgressReport = Callable[[Progress], Awaitable[None]]
"""Told of each progress of one call."""


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
        for name in ("connect_timeout", "call_timeout", "call_max", "close_timeout"):
            value: float = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(
                    f"ConnectionSettings.{name} must be a positive number of seconds, got {value!r}"
                )
        if self.call_max < self.call_timeout:
            raise ConfigError(
                f"ConnectionSettings.call_max ({self.call_max!r}) is below call_timeout "
                f"({self.call_timeout!r}): raise it, or lower call_timeout"
            )
        for name, least in (
            ("max_concurrent_connects", 1),
            ("max_tool_pages", 1),
            ("max_result_bytes", 1024),
        ):
            count: int = getattr(self, name)
            if count < least:
                raise ConfigError(f"ConnectionSettings.{name} must be at least {least}, got {count!r}")


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


_E = TypeVar("_E", bound=RemoteError)

OnTools = Callable[["Connection"], Awaitable[None]]
"""Hears that a connection listed its tools again after the server said they changed."""
_RELIST_EVERY: Final = 1.0
"""Seconds between two listings after changes: a burst of notifications costs one listing."""
_RELISTEN_AFTER: Final = 30.0
"""Seconds before a ``subscriptions/listen`` stream that dropped is opened again."""


@functools.lru_cache(maxsize=32)
def redactor_of(secrets: frozenset[str]) -> Redactor:
    """One redactor per set of credentials, shared: building one costs milliseconds, and every
    connection to a server with the same headers, and every error text of it, needs the same."""
    return Redactor(secrets)


def _redacted(error: _E, endpoint: Endpoint) -> _E:
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


def _cause(error: RemoteError, cause: BaseException | None, endpoint: Endpoint) -> BaseException | None:
    """The cause to chain, unless its text holds a credential (then the chain is cut)."""
    if cause is None or not (secrets := endpoint.secrets):
        return cause
    text = "".join(traceback.format_exception(cause))
    # With OAuth the chain is always cut: a refresh or token exchange may carry secrets that
    # are known only once the flow is done.
    return None if endpoint.auth is not None or redactor_of(secrets).contains(text) else cause


class _CallClock:
    """One call's time: ``base`` seconds from its start or its last progress, never past ``limit``.

    A question to a person stops it (``pause``), and the time the person took is added back.
    """

    def __init__(self, base: float, limit: float) -> None:
        self.base = base
        self.limit = limit
        """The latest deadline (the event loop's clock): the call's start plus ``call_max``."""
        self.scope = anyio.CancelScope(deadline=min(anyio.current_time() + base, limit))
        self._left: float | None = None
        """While paused: the seconds the call had left."""
        self._paused_at = 0.0

    @property
    def capped(self) -> bool:
        """Whether the deadline is the latest one (progress can no longer move it)."""
        return self.scope.deadline >= self.limit

    def progressed(self) -> None:
        now = anyio.current_time()
        if self._left is None:
            self.scope.deadline = min(now + self.base, self.limit)
        else:
            self._left = self.base

    def pause(self, now: float) -> None:
        if self._left is None:
            self._left = max(0.0, self.scope.deadline - now)
            self._paused_at = now
            self.scope.deadline = math.inf

    def resume(self, now: float) -> None:
        if self._left is not None:
            self.limit += now - self._paused_at
            self.scope.deadline = min(now + self._left, self.limit)
            self._left = None


class _AttemptFailed(Exception):
    """One transport's connect attempt failed; carries the translated failure to ``Connector.connect``."""

    def __init__(self, failure: ConnectFailure) -> None:
        super().__init__(failure.error.reason)
        self.failure = failure


class Connection:
    """A live MCP session with one server, with its tools listed; made by ``Connector.connect``."""

    def __init__(
        self,
        endpoint: Endpoint,
        transport: TransportName,
        *,
        settings: ConnectionSettings,
        ssl_context: ssl.SSLContext,
        resolve: Resolver | None = None,
        mode: str = HANDSHAKE,
        ask: Ask | None = None,
        redact: Callable[[str], str] | None = None,
        on_tools: OnTools | None = None,
        tools_cache: ResponseCacheStore | None = None,
        prior_discover: mcp_types.DiscoverResult | None = None,
    ) -> None:
        """``mode`` is the SDK's: NEGOTIATE, HANDSHAKE, or a modern protocol version to speak at once
        (with ``prior_discover``, the server's last ``server/discover`` answer, still fresh).

        ``ask`` puts the server's questions (elicitation) to a person; without it they are declined
        at once, as sampling and roots always are. ``redact`` cleans what the person is shown
        (default: the endpoint's own header values). ``on_tools`` hears of every new listing
        after a change (``tools`` holds it by then). ``tools_cache`` keeps listings as the
        server allows, for this server's connections only (None: always list).
        """
        self._tools_cache = tools_cache
        self._prior_discover = prior_discover
        self.discovered: mcp_types.DiscoverResult | None = None
        """The server's ``server/discover`` answer when this connect asked for it (not reused)."""
        self.endpoint = endpoint
        self._on_tools = on_tools
        self._tools_changed = anyio.Event()
        self._ask = ask
        self._redact = (
            redact if redact is not None else redactor_of(frozenset(endpoint.headers.values())).redact
        )
        self._calls: set[_CallClock] = set()
        """The calls in flight, each with its clock (stopped while a person answers a question)."""
        self._questions = 0
        self.transport: TransportName = transport
        self.mode = mode
        self.protocol: str | None = None
        """The protocol version agreed with the server, once connected."""
        self.instructions: str | None = None
        """What the server says about using it (``instructions``), once connected: its words, untrusted."""
        self.tools: Sequence[mcp_types.Tool] = ()
        self._settings = settings
        self._ssl_context = ssl_context
        self._trace = HttpTrace()
        self._budget = ResultBudget(settings.max_result_bytes, event_limit=self._event_limit())
        self._resolve = resolve
        self._client: Client | None = None
        self._broken_reason: str | None = None
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._has_session = False
        """The server gave a session id: the SDK then opens the session's listening GET stream."""
        self._listening = anyio.Event()
        """The listening stream's GET was answered (its headers, whatever the status)."""

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"broken: {self._broken_reason}" if self.broken else "open"
        return (
            f"<Connection {self.endpoint.server!r} over {self.transport} ({self.protocol or self.mode}), "
            f"{len(self.tools)} tools, {state}>"
        )

    @property
    def broken(self) -> bool:
        """True once a call failed in transport or timed out: drop this connection and connect again."""
        return self._broken_reason is not None

    @property
    def closed(self) -> bool:
        """True once the connection's task has ended: closed, broken, or its task group cancelled."""
        return self._done.is_set()

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        on_progress: ProgressReport | None = None,
    ) -> mcp_types.CallToolResult | PendingTask:
        """Call one tool, once, within ``timeout`` seconds (the settings' ``call_timeout`` if None).

        Each progress notification of the call gives it ``timeout`` seconds again, up to the
        settings' ``call_max`` from its start, and goes to ``on_progress``. A tool that runs
        only as a task is called as one, and its states go to ``on_progress`` too; a task still
        running when the time is up is handed back as a ``PendingTask`` for ``finish_task``.

        A result with ``is_error`` set is returned as it is: the tool ran and failed.

        Raises:
            CallFailed: The transport failed (or the connection was already broken or closed);
                the connection is now broken.
            RemoteTimeout: No result in time; the connection is now broken.
            RemoteError: The server answered with a JSON-RPC error, or with a result that
                breaks the protocol; the connection still works.
        """
        server = self.endpoint.server
        client = self._live_client()
        seconds = self._settings.call_timeout if timeout is None else timeout
        errors_before = self._trace.errors
        cuts_before = self._cuts()
        started = anyio.current_time()
        clock = _CallClock(seconds, started + max(seconds, self._settings.call_max))
        progressed = self._progress_callback(clock, on_progress)
        pending: PendingTask | None = None
        try:
            with clock.scope, self._clocked(clock):
                if not task_required(self._tool(name)):
                    return await client.call_tool(name, arguments, progress_callback=progressed)
                task = await create_task(client, name, arguments, timeout=seconds, on_progress=progressed)
                pending = PendingTask(server=server, tool=name, task=task, started=started)
                return await self._follow(client, pending, on_progress)
        except Exception as exc:  # boundary: every SDK and httpx2 failure is translated at this seam
            self._call_failed(exc, cuts_before, errors_before, seconds)
        # Only reached when the scope's deadline cancelled the call.
        assert clock.scope.cancelled_caught
        if pending is not None:
            # The task runs on at the server, whose connection is fine: it is followed on later.
            return pending
        error = (
            RemoteTimeout(
                f"still running after {self._settings.call_max:g} s, the most a call may take", server=server
            )
            if clock.capped
            else timed_out(seconds, server=server)
        )
        self._break(error.reason)
        raise error

    def _live_client(self) -> Client:
        """The session's client, for a call; a broken or closed connection fails it at once."""
        server = self.endpoint.server
        if self._broken_reason is not None:
            raise CallFailed(f"connection is broken ({self._broken_reason})", server=server)
        if self._client is None or self._stop.is_set():
            raise CallFailed("connection is closed", server=server)
        return self._client

    def _call_failed(self, exc: Exception, cuts_before: int, errors_before: int, timeout: float) -> NoReturn:
        """Translate what a call raised; a transport failure or a timeout breaks the connection."""
        error = self._own_call_error(exc, cuts_before) or call_error(
            exc, server=self.endpoint.server, trace=self._trace, errors_before=errors_before, timeout=timeout
        )
        if isinstance(error, CallFailed | RemoteTimeout):
            self._break(error.reason)
        raise _redacted(error, self.endpoint) from _cause(error, exc, self.endpoint)

    async def finish_task(
        self, pending: PendingTask, *, on_progress: ProgressReport | None = None
    ) -> mcp_types.CallToolResult:
        """Follow a task that outlived its call until it is done, up to ``call_max`` from the call's start.

        Raises:
            RemoteTimeout: The task was not done in time (the connection still works).
            CallFailed, RemoteError: as ``call_tool``.
        """
        server = self.endpoint.server
        client = self._live_client()
        errors_before = self._trace.errors
        cuts_before = self._cuts()
        call_max = self._settings.call_max
        try:
            with anyio.move_on_after(max(0.0, pending.started + call_max - anyio.current_time())):
                return await self._follow(client, pending, on_progress)
        except Exception as exc:  # boundary: every SDK and httpx2 failure is translated at this seam
            self._call_failed(exc, cuts_before, errors_before, call_max)
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._settings.close_timeout):
            try:
                await cancel_task(client, pending.task_id, timeout=self._settings.close_timeout)
            except Exception as exc:  # boundary: a courtesy to the server; its failure changes nothing
                logger.debug("%s: cancelling task %s failed: %s", server, pending.task_id, type(exc).__name__)
        raise RemoteTimeout(f"the task did not finish within {call_max:g} s", server=server)

    async def _follow(
        self, client: Client, pending: PendingTask, on_progress: ProgressReport | None
    ) -> mcp_types.CallToolResult:
        """Poll the task until it is done (or waits for input), then fetch its result."""
        shown: str | None = None
        while pending.task.status not in TERMINAL and pending.task.status != "input_required":
            if on_progress is not None and pending.task.status_message != shown:
                shown = pending.task.status_message
                await on_progress(Progress(message=shown))
            await anyio.sleep(poll_seconds(pending.task))
            pending.task = await get_task(client, pending.task_id, timeout=self._settings.call_timeout)
        # Waits until the task is done; the server's questions come on this request's stream.
        return await task_result(client, pending.task_id, timeout=None)

    def _tool(self, name: str) -> mcp_types.Tool | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def unrunnable(self, tool: mcp_types.Tool) -> str | None:
        """Why this host cannot call ``tool`` over this connection, or None when it can."""
        capabilities = self._client.server_capabilities if self._client is not None else None
        return unrunnable_reason(tool, self.protocol, capabilities)

    def _progress_callback(self, clock: _CallClock, report: ProgressReport | None) -> ProgressFnT:
        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            # The server is alive and working: the call gets its time again (up to call_max).
            clock.progressed()
            if report is not None:
                await report(Progress(progress=progress, total=total, message=message))

        return progressed

    @contextlib.contextmanager
    def _clocked(self, clock: _CallClock) -> Iterator[None]:
        """Count ``clock`` among the calls in flight (which a question stops) while inside."""
        if self._questions:
            clock.pause(anyio.current_time())
        self._calls.add(clock)
        try:
            yield
        finally:
            self._calls.discard(clock)

    async def _elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """The SDK's elicitation callback: a request of the server's, or an input request of a 2026 result."""
        assert self._ask is not None
        try:
            question = to_question(self.endpoint.server, params, self._redact)
        except Refused as refused:
            logger.info("%s: a question was refused: %s", self.endpoint.server, refused.reason)
            return mcp_types.ErrorData(code=mcp_types.INVALID_PARAMS, message=f"refused: {refused.reason}")
        with self._paused():
            answer = await self._ask(question)
        return elicit_result(params, answer)

    @contextlib.contextmanager
    def _paused(self) -> Iterator[None]:
        """While a person answers a question, the call timeouts stand still: a person is no hung server."""
        if self._questions == 0:
            now = anyio.current_time()
            for clock in self._calls:
                clock.pause(now)
        self._questions += 1
        try:
            yield
        finally:
            self._questions -= 1
            if self._questions == 0:
                now = anyio.current_time()
                for clock in self._calls:
                    clock.resume(now)

    def _cuts(self) -> int:
        """How many answers the result budget cut off: results come on POST bodies, or over SSE on its stream."""
        return self._budget.exceeded_events if self.transport == "sse" else self._budget.exceeded

    def _own_call_error(self, exc: Exception, cuts_before: int) -> RemoteError | None:
        """The failures ``call_error`` cannot see: a refused address, a result over the budget, a login."""
        server = self.endpoint.server
        if self.endpoint.auth is not None and (why := self.endpoint.auth.needs_login) is not None:
            # The token lacks a scope the call needs (step-up): only the owner can log in again.
            return NeedsLogin(why, server=server)
        if (refusal := find_refusal(exc)) is not None:
            return CallFailed(refusal.reason, server=server)
        if self._cuts() > cuts_before or oversized_event(exc):
            if self.transport == "sse":
                # The result came on the session's one event stream, which the cut ended.
                return CallFailed(too_large_reason(self._event_limit()), server=server)
            # Only that request's answer was refused: the session is fine.
            return RemoteError(too_large_reason(self._budget.limit), server=server)
        return None

    def _own_connect_error(self, exc: Exception) -> ConnectFailure | None:
        """A refused address or an oversized answer while connecting; never worth the other transport."""
        server = self.endpoint.server
        if self.endpoint.auth is not None and (why := self.endpoint.auth.needs_login) is not None:
            # Only a person can unblock it: no other transport, and no retry timer.
            return ConnectFailure(NeedsLogin(why, server=server), try_other_transport=False)
        if self.endpoint.auth is not None and (why := self.endpoint.auth.refused) is not None:
            # The server refuses the token for scopes it holds: neither a timer nor the other
            # transport changes that. (A call refused so fails alone: the connection is fine.)
            return ConnectFailure(AccessRefused(why, server=server), try_other_transport=False)
        if self.endpoint.auth is None and not self.endpoint.headers and self._trace.login_challenge:
            # Added without credentials, and it takes a bearer token: a login can get one.
            return ConnectFailure(
                NeedsLogin("this server needs a login", server=server), try_other_transport=False
            )
        if (refusal := find_refusal(exc)) is not None:
            return ConnectFailure(ConnectFailed(refusal.reason, server=server), try_other_transport=False)
        if self._cuts() or oversized_event(exc):
            limit = format_size(self._event_limit() if self.transport == "sse" else self._budget.limit)
            reason = f"the server's answer is larger than {limit}, the most this host reads"
            return ConnectFailure(ConnectFailed(reason, server=server), try_other_transport=False)
        return None

    def _event_limit(self) -> int:
        if self.transport == "sse":
            return min(SSE_TRANSPORT_EVENT_LIMIT, self._settings.max_result_bytes)
        return self._settings.max_result_bytes

    async def aclose(self) -> None:
        """Close the session (bounded by the settings' ``close_timeout``) and wait until it is. Idempotent."""
        self._stop.set()
        await self._done.wait()

    def _break(self, reason: str) -> None:
        if self._broken_reason is None:
            self._broken_reason = reason
            logger.info("%s: connection dropped: %s", self.endpoint.server, reason)
        # The connection's own task closes the session; the caller does not wait for it.
        self._stop.set()

    def _http_client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        """An httpx2 client for this connection; its signature is the SDK's ``McpHttpClientFactory``."""
        egress = self._settings.egress
        transport = (
            guarded_transport(egress, ssl_context=self._ssl_context, resolve=self._resolve)
            if egress.checks
            else None
        )
        options: dict[str, Any] = dict(
            # Only what the result budget can decode in bounded steps (see ``_budget``).
            headers={"Accept-Encoding": "gzip, deflate", **(headers or {})},
            transport=transport,
            timeout=timeout if timeout is not None else self._timeouts(),
            auth=auth,
            # The shared context: building one per client costs ~27 ms of blocked loop and ~0.9 MB.
            verify=self._ssl_context,
            # Off by default so an environment proxy never sees the server's headers; never with
            # the public egress policy, since a proxy resolves and connects out of its reach.
            trust_env=self._settings.trust_env and not egress.checks,
            # The SDK follows redirects itself, and only within the endpoint's origin, so headers
            # never reach another origin; httpx2's own following stays off.
            follow_redirects=False,
            event_hooks={"response": [self._trace.on_response, self._budget.on_response, self._on_response]},
        )
        # Over Streamable HTTP the SDK also opens the listening GET stream of a session: a server
        # sends its requests outside a call there (roots/list, ping, a question), and one that
        # gets no answer waits out its own timeout with a call of ours hanging on it.
        return httpx2.AsyncClient(**options)

    async def _on_response(self, response: httpx2.Response) -> None:
        if response.request.method == "GET":
            self._listening.set()
        elif "mcp-session-id" in response.headers:
            self._has_session = True

    async def _listening_opened(self) -> None:
        """Wait, briefly, until a session's listening stream is open.

        The SDK opens it in a task of its own once the handshake is done. A server that sends a
        request outside a call (a question, roots/list) sends it there, and drops it while no
        stream is open: a first call made before then could wait out its whole timeout.
        """
        if self.transport == "streamable-http" and self._has_session:
            with anyio.move_on_after(_LISTENING_WAIT):
                await self._listening.wait()

    def _timeouts(self) -> httpx2.Timeout:
        read = max(_STREAM_READ_TIMEOUT, self._settings.call_timeout)
        return httpx2.Timeout(self._settings.connect_timeout, read=read)

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> ClientTransport:
        url = self.endpoint.url
        headers = dict(self.endpoint.headers)
        if self.transport == "streamable-http":
            http = await stack.enter_async_context(
                self._http_client(headers=headers, auth=self.endpoint.auth)
            )
            return streamable_http_client(
                url, http_client=http, max_sse_event_size=self._settings.max_result_bytes
            )
        timeouts = self._timeouts()
        transport: ClientTransport = sse_client(
            url,
            headers=headers,
            timeout=self._settings.connect_timeout,
            sse_read_timeout=timeouts.read if timeouts.read is not None else _STREAM_READ_TIMEOUT,
            httpx_client_factory=self._http_client,
            auth=self.endpoint.auth,
        )
        return transport

    async def _list_tools(self, client: Client, cache_mode: CacheMode = "use") -> tuple[mcp_types.Tool, ...]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(self._settings.max_tool_pages):
            page = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tuple(tools)
        logger.warning(
            "%s: tool listing stopped after %d pages; the remaining tools are ignored",
            self.endpoint.server,
            self._settings.max_tool_pages,
        )
        return tuple(tools)

    async def _on_message(self, message: object) -> None:
        """The SDK's message handler: a change of the tool list (2025-11-25) is listed again."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools_changed.set()

    async def _follow_changes(self, client: Client) -> None:
        """While connected: list the tools again whenever the server says they changed; until stopped."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._relist, client)
            capabilities = client.server_capabilities
            if (
                client.protocol_version in MODERN_PROTOCOL_VERSIONS
                and capabilities.tools is not None
                and capabilities.tools.list_changed
            ):
                tg.start_soon(self._listen, client)
            await self._stop.wait()
            tg.cancel_scope.cancel()

    async def _relist(self, client: Client) -> None:
        server = self.endpoint.server
        while True:
            await self._tools_changed.wait()
            self._tools_changed = anyio.Event()
            try:
                with anyio.fail_after(self._settings.connect_timeout):
                    self.tools = await self._list_tools(client, "refresh")
            except Exception as exc:  # boundary: a failed listing keeps the tools known
                logger.info("%s: listing the changed tools failed: %s", server, type(exc).__name__)
            else:
                logger.info("%s: the tool list changed: %d tools", server, len(self.tools))
                if self._on_tools is not None:
                    try:
                        await self._on_tools(self)
                    except Exception as exc:  # boundary: the owner's handler must not end the connection
                        logger.error(
                            "%s: handling a changed tool list failed: %s", server, type(exc).__name__
                        )
            # A server that says "changed" without pause gets one listing a second, not a storm.
            await anyio.sleep(_RELIST_EVERY)

    async def _listen(self, client: Client) -> None:
        """2026-07-28: tool-list changes come on a ``subscriptions/listen`` stream, opened again when it drops."""
        server = self.endpoint.server
        first = True
        while True:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    if not first:
                        # Changes made while no stream was open were never sent: look again.
                        self._tools_changed.set()
                    first = False
                    async for _event in subscription:
                        self._tools_changed.set()
                return  # the server closed the subscription itself
            except SubscriptionLost:
                logger.info("%s: the tool-change subscription dropped; opening it again", server)
            except Exception as exc:  # boundary: without the stream the list is still listed on reconnect
                logger.info("%s: no tool-change subscription: %s", server, type(exc).__name__)
                return
            await anyio.sleep(_RELISTEN_AFTER)

    async def _stop_with_owner(self) -> None:
        """Runs beside ``_run`` in the owner's task group: when that group is cancelled, stop."""
        try:
            await self._done.wait()
        finally:
            self._stop.set()

    async def _run(self, deadline: float, *, task_status: TaskStatus[None]) -> None:
        """The connection's task: connect, list tools, report started, wait for stop, close.

        Before ``task_status.started()`` a failure is raised (as ``_AttemptFailed``) to the
        task that called ``TaskGroup.start``; after it, a failure only marks the connection
        broken, so one server's death never cancels its siblings in the task group.
        """
        server = self.endpoint.server
        started = handshaken = False
        # One scope for the whole life of the connection: its deadline bounds connect +
        # handshake + listing, is lifted once connected, and bounds the teardown at the end.
        scope = anyio.CancelScope(deadline=deadline)
        try:
            with scope:
                async with contextlib.AsyncExitStack() as stack:
                    # The protocol is known once the session is entered, or up front for a
                    # modern version spoken without a handshake.
                    transport = complete_by_default(
                        await self._open_transport(stack), lambda: self.protocol or self.mode
                    )
                    # The cache is this server's alone (one store per server of a chat, whose
                    # credentials are fixed), so one partition serves; None lists every time.
                    cache = (
                        CacheConfig(
                            store=self._tools_cache, partition="server", target_id=self.endpoint.server
                        )
                        if self._tools_cache is not None
                        else None
                    )
                    client = Client(
                        transport,
                        mode=self.mode,
                        prior_discover=self._prior_discover,
                        cache=cache,
                        client_info=_CLIENT_INFO,
                        elicitation_callback=self._elicit if self._ask is not None else None,
                        message_handler=self._on_message,
                    )
                    await stack.enter_async_context(client)
                    self.protocol = client.protocol_version
                    self.instructions = client.instructions
                    if self.mode == NEGOTIATE:
                        self.discovered = client.session.discover_result
                    # A modern version is spoken without a handshake: until the listing is
                    # answered, nothing says the server speaks this transport (or this version).
                    handshaken = self.mode in (NEGOTIATE, HANDSHAKE)
                    # Listing through the session also primes its output-schema cache, so the
                    # first call does not list the tools again to validate its result.
                    self.tools = await self._list_tools(client)
                    await self._listening_opened()
                    # From here on the owner's cancellation must not reach the SDK's tasks: it
                    # would cancel them one by one and the session would end without its
                    # DELETE. ``_stop_with_owner`` turns that cancellation into a stop instead.
                    scope.shield = True
                    scope.deadline = math.inf
                    self._client = client
                    started = True
                    task_status.started()
                    try:
                        await self._follow_changes(client)
                    finally:
                        self._client = None
                        # Closing a session on a frozen server can wait out its read timeout
                        # (the DELETE): the close is bounded.
                        scope.deadline = anyio.current_time() + self._settings.close_timeout
        except Exception as exc:  # boundary: every SDK and httpx2 failure is translated at this seam
            if started:
                failure = connect_error(
                    exc, server=server, trace=self._trace, timeout=self._settings.call_timeout
                )
                if self._stop.is_set():
                    logger.debug("%s: closing failed: %s", server, failure.error.reason)
                else:
                    # The transport died on its own, between calls.
                    self._broken_reason = self._broken_reason or failure.error.reason
                    logger.info("%s: connection ended: %s", server, failure.error.reason)
            elif scope.cancel_called:
                raise _AttemptFailed(
                    ConnectFailure(timed_out(self._settings.connect_timeout, server=server), False)
                ) from exc
            else:
                failure = self._own_connect_error(exc) or connect_error(
                    exc, server=server, trace=self._trace, timeout=self._settings.connect_timeout
                )
                if handshaken:
                    # It speaks this transport: the other one would only hide the real reason.
                    failure = ConnectFailure(failure.error, try_other_transport=False)
                raise _AttemptFailed(failure) from exc
        finally:
            self._client = None
            self._done.set()
        if not started:
            # The deadline passed, and the scope swallowed the cancellation it caused.
            raise _AttemptFailed(
                ConnectFailure(timed_out(self._settings.connect_timeout, server=server), False)
            )


class Connector:
    """Connects endpoints; one per host, sharing settings, an SSL context and what each URL spoke last."""

    def __init__(
        self,
        settings: ConnectionSettings | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        resolve: Resolver | None = None,
    ) -> None:
        """``resolve`` replaces the system's DNS for the egress checks (``settings.egress`` of ``public``)."""
        self.settings = settings if settings is not None else ConnectionSettings()
        self._ssl_context = ssl_context
        self._resolve = resolve
        self._ssl_lock = anyio.Lock()
        self._slots = anyio.Semaphore(self.settings.max_concurrent_connects)
        # Per URL, the transport that last worked, so "auto" goes straight to it next time.
        self._spoken: dict[str, TransportName] = {}
        # Per URL, how its Streamable HTTP connects start: HANDSHAKE or a modern version.
        self._protocols: dict[str, str] = {}
        # Per server (see ``_discover_key``), its last discover answer and until when it is fresh.
        self._discovered: dict[tuple[object, ...], tuple[mcp_types.DiscoverResult, float]] = {}

    def remembered_transport(self, url: str) -> TransportName | None:
        """The transport that last worked for ``url`` with ``transport="auto"``, if any."""
        return self._spoken.get(url)

    def remembered_protocol(self, url: str) -> str | None:
        """How the next Streamable HTTP connect to ``url`` starts (HANDSHAKE or a modern version), if known."""
        return self._protocols.get(url)

    async def ssl_context(self) -> ssl.SSLContext:
        """The SSL context of every connection, built once (in a worker thread: it takes ~27 ms)."""
        async with self._ssl_lock:
            if self._ssl_context is None:
                trust_env = self.settings.trust_env
                self._ssl_context = await anyio.to_thread.run_sync(
                    lambda: httpx2.create_ssl_context(trust_env=trust_env)
                )
            return self._ssl_context

    async def login_client(self, auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        """An HTTP client for an OAuth login's (or revocation's) requests, under the egress policy of every connection.

        The metadata a server points at (its authorization server, their endpoints) is no more
        trusted than the server's own URL: every address is judged the same way.
        """
        egress = self.settings.egress
        ssl_context = await self.ssl_context()
        transport = (
            guarded_transport(egress, ssl_context=ssl_context, resolve=self._resolve)
            if egress.checks
            else None
        )
        return httpx2.AsyncClient(
            auth=auth,
            transport=transport,
            verify=ssl_context,
            trust_env=self.settings.trust_env and not egress.checks,
            follow_redirects=False,
            timeout=httpx2.Timeout(self.settings.connect_timeout),
        )

    def _order(self, endpoint: Endpoint) -> tuple[TransportName, ...]:
        if endpoint.transport != "auto":
            return (endpoint.transport,)
        if self._spoken.get(endpoint.url) == "sse":
            return ("sse", "streamable-http")
        return ("streamable-http", "sse")

    def _modes(self, endpoint: Endpoint, transport: TransportName) -> tuple[str, ...]:
        """The connect modes to try over ``transport``, in order (see the module docstring)."""
        if transport == "sse":
            return (HANDSHAKE,)
        remembered = self._protocols.get(endpoint.url)
        if remembered in MODERN_PROTOCOL_VERSIONS and self._fresh_discover(endpoint) is None:
            # What the server said of itself (its instructions too) may have changed: ask again.
            return (NEGOTIATE,)
        return (remembered, NEGOTIATE) if remembered is not None else (NEGOTIATE,)

    @staticmethod
    def _discover_key(endpoint: Endpoint, scope: str) -> tuple[object, ...]:
        """Whose a discover answer is: a ``public`` one the URL's, a ``private`` one these credentials'."""
        if scope == "public":
            return (endpoint.url,)
        return (endpoint.url, endpoint.server, tuple(sorted(endpoint.headers.items())), id(endpoint.auth))

    def _fresh_discover(self, endpoint: Endpoint) -> mcp_types.DiscoverResult | None:
        """The server's last discover answer while its ``ttlMs`` says it is fresh, else None."""
        now = anyio.current_time()
        for scope in ("private", "public"):
            found = self._discovered.get(self._discover_key(endpoint, scope))
            if found is not None and now < found[1]:
                return found[0]
        return None

    def _connected(self, endpoint: Endpoint, connection: Connection) -> None:
        """Remember how ``endpoint`` connected over Streamable HTTP, for its next connect."""
        protocol = connection.protocol
        url = endpoint.url
        self._protocols[url] = protocol if protocol in MODERN_PROTOCOL_VERSIONS and protocol else HANDSHAKE
        if (discovered := connection.discovered) is not None and discovered.ttl_ms > 0:
            key = self._discover_key(endpoint, discovered.cache_scope)
            self._discovered[key] = (discovered, anyio.current_time() + discovered.ttl_ms / 1000)

    def _failed(self, url: str, failure: ConnectFailure) -> None:
        """Forget how ``url`` connected when its server now answers otherwise."""
        if isinstance(failure.error, RemoteTimeout):
            # No answer in time: a probe the server never answers must not cost every connect.
            self._protocols.setdefault(url, HANDSHAKE)
        elif failure.try_other_transport:
            # The server answered, but not as it did before: negotiate again.
            self._protocols.pop(url, None)

    async def connect(
        self,
        endpoint: Endpoint,
        task_group: TaskGroup,
        *,
        ask: Ask | None = None,
        redact: Callable[[str], str] | None = None,
        on_tools: OnTools | None = None,
        tools_cache: ResponseCacheStore | None = None,
    ) -> Connection:
        """Connect to ``endpoint`` and list its tools, within the connect timeout as a whole.

        The connection's task runs in ``task_group``. ``ask``, ``redact``, ``on_tools`` and ``tools_cache``: see ``Connection``. With ``transport="auto"``, Streamable HTTP
        is tried first (or whichever transport last worked for this URL), and the other one when
        the server rejects it.

        At most ``max_concurrent_connects`` connects run at once; the connect timeout counts
        from when this one starts.

        Raises:
            ConnectFailed: Connecting, the handshake or the tool listing failed.
            RemoteTimeout: It did not finish within the connect timeout.
        """
        async with self._slots:
            return await self._connect(endpoint, task_group, ask, redact, on_tools, tools_cache)

    async def _connect(
        self,
        endpoint: Endpoint,
        task_group: TaskGroup,
        ask: Ask | None,
        redact: Callable[[str], str] | None,
        on_tools: OnTools | None,
        tools_cache: ResponseCacheStore | None,
    ) -> Connection:
        deadline = anyio.current_time() + self.settings.connect_timeout
        if (refusal := self.settings.egress.url_refusal(endpoint.url)) is not None:
            # Judged before any network; what the name resolves to is checked when connecting.
            raise ConnectFailed(refusal, server=endpoint.server)
        ssl_context = await self.ssl_context()
        order = self._order(endpoint)
        error: ConnectFailed | RemoteTimeout | None = None
        attempts = [(transport, mode) for transport in order for mode in self._modes(endpoint, transport)]
        for transport, mode in attempts:
            connection = Connection(
                endpoint,
                transport,
                settings=self.settings,
                ssl_context=ssl_context,
                resolve=self._resolve,
                mode=mode,
                ask=ask,
                redact=redact,
                on_tools=on_tools,
                tools_cache=tools_cache,
                prior_discover=self._fresh_discover(endpoint) if mode in MODERN_PROTOCOL_VERSIONS else None,
            )
            try:
                await task_group.start(connection._run, deadline)
            except _AttemptFailed as failed:
                if transport == "streamable-http":
                    self._failed(endpoint.url, failed.failure)
                error = _redacted(failed.failure.error, endpoint)
                logger.info("%s: connecting over %s failed: %s", endpoint.server, transport, error.reason)
                if failed.failure.try_other_transport:
                    continue
                raise error from _cause(error, failed.__cause__, endpoint)
            task_group.start_soon(connection._stop_with_owner)
            if endpoint.transport == "auto":
                self._spoken[endpoint.url] = transport
            if transport == "streamable-http":
                self._connected(endpoint, connection)
            logger.info(
                "%s: connected over %s (%s), %d tools",
                endpoint.server,
                transport,
                connection.protocol,
                len(connection.tools),
            )
            return connection
        assert error is not None
        raise error
