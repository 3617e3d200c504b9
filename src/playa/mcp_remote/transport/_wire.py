"""One connection's HTTP side: its httpx2 clients, under the egress policy and the result budget.

Also what only this side sees of a failure: a refused address, an answer over the budget, a
login the server asks for (``HttpTrace``), which ``_errors`` cannot tell from the SDK's errors.
"""

from __future__ import annotations

import contextlib
import ssl
from typing import Any, Final

import anyio
import httpx2
from mcp.client import Transport as ClientTransport
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from ...exceptions import AccessRefused, CallFailed, ConnectFailed, NeedsLogin, RemoteError
from ._budget import SSE_TRANSPORT_EVENT_LIMIT, ResultBudget, format_size, oversized_event, too_large_reason
from ._egress import Resolver, find_refusal, guarded_transport
from ._endpoint import ConnectionSettings, Endpoint, TransportName
from ._errors import ConnectFailure, HttpTrace

__all__ = ["Wire"]

# A response stream (a long tool call, the SSE event stream) may stay quiet this long between
# chunks before httpx2 gives up on it; the call timeout bounds calls on its own.
_STREAM_READ_TIMEOUT: Final = 300.0
_LISTENING_WAIT: Final = 5.0
"""Seconds a new session waits for its listening stream to be answered before it is reported
connected; a server slower than that to open it is used all the same."""


class Wire:
    """The HTTP side of one connection: clients, the result budget, the trace of answers."""

    def __init__(
        self,
        endpoint: Endpoint,
        transport: TransportName,
        *,
        settings: ConnectionSettings,
        ssl_context: ssl.SSLContext,
        resolve: Resolver | None,
    ) -> None:
        self.endpoint = endpoint
        self.transport: TransportName = transport
        self.settings = settings
        self._ssl_context = ssl_context
        self._resolve = resolve
        self.trace = HttpTrace()
        self.budget = ResultBudget(settings.max_result_bytes, event_limit=self.event_limit())
        self._has_session = False
        """The server gave a session id: the SDK then opens the session's listening GET stream."""
        self._connecting = True
        """Until the connect is done, when whether there is a session is known."""
        self._listened = False
        """The listening stream's GET was answered (its headers, whatever the status)."""
        self._listening: anyio.Event | None = None
        """Set when it is, for a connect waiting for it (made only then)."""

    def http_client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        """An httpx2 client for this connection; its signature is the SDK's ``McpHttpClientFactory``."""
        egress = self.settings.egress
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
            trust_env=self.settings.trust_env and not egress.checks,
            # The SDK follows redirects itself, and only within the endpoint's origin, so headers
            # never reach another origin; httpx2's own following stays off.
            follow_redirects=False,
            event_hooks={"response": [self._on_response]},
        )
        # Over Streamable HTTP the SDK also opens the listening GET stream of a session: a server
        # sends its requests outside a call there (roots/list, ping, a question), and one that
        # gets no answer waits out its own timeout with a call of ours hanging on it.
        return httpx2.AsyncClient(**options)

    async def _on_response(self, response: httpx2.Response) -> None:
        """Every response's one hook: the trace first (it may read a short error body), then the budget."""
        if response.status_code >= 300:
            await self.trace.on_response(response)  # only errors and redirects are traced
        listening = response.request.method == "GET"
        self.budget.wrap(response, per_event=listening)
        if listening:
            self._listened = True
            if self._listening is not None:
                self._listening.set()
        elif self._connecting and "mcp-session-id" in response.headers:
            # A server gives its session id in its answer to the handshake, or never.
            self._has_session = True

    async def listening_opened(self) -> None:
        """Wait, briefly, until a session's listening stream is open.

        The SDK opens it in a task of its own once the handshake is done. A server that sends a
        request outside a call (a question, roots/list) sends it there, and drops it while no
        stream is open: a first call made before then could wait out its whole timeout.
        """
        self._connecting = False
        if self.transport == "streamable-http" and self._has_session and not self._listened:
            listening = self._listening = anyio.Event()
            with anyio.move_on_after(_LISTENING_WAIT):
                await listening.wait()

    def _timeouts(self) -> httpx2.Timeout:
        read = max(_STREAM_READ_TIMEOUT, self.settings.call_timeout)
        return httpx2.Timeout(self.settings.connect_timeout, read=read)

    async def open(self, stack: contextlib.AsyncExitStack) -> ClientTransport:
        url = self.endpoint.url
        headers = dict(self.endpoint.headers)
        if self.transport == "streamable-http":
            http = await stack.enter_async_context(self.http_client(headers=headers, auth=self.endpoint.auth))
            return streamable_http_client(
                url, http_client=http, max_sse_event_size=self.settings.max_result_bytes
            )
        timeouts = self._timeouts()
        transport: ClientTransport = sse_client(
            url,
            headers=headers,
            timeout=self.settings.connect_timeout,
            sse_read_timeout=timeouts.read if timeouts.read is not None else _STREAM_READ_TIMEOUT,
            httpx_client_factory=self.http_client,
            auth=self.endpoint.auth,
        )
        return transport

    def cuts(self) -> int:
        """How many answers the result budget cut off: results come on POST bodies, or over SSE on its stream."""
        return self.budget.exceeded_events if self.transport == "sse" else self.budget.exceeded

    def call_failure(self, exc: Exception, cuts_before: int) -> RemoteError | None:
        """The failures ``call_error`` cannot see: a refused address, a result over the budget, a login."""
        server = self.endpoint.server
        if self.endpoint.auth is not None and (why := self.endpoint.auth.needs_login) is not None:
            # The token lacks a scope the call needs (step-up): only the owner can log in again.
            return NeedsLogin(why, server=server)
        if (refusal := find_refusal(exc)) is not None:
            return CallFailed(refusal.reason, server=server)
        if self.cuts() > cuts_before or oversized_event(exc):
            if self.transport == "sse":
                # The result came on the session's one event stream, which the cut ended.
                return CallFailed(too_large_reason(self.event_limit()), server=server)
            # Only that request's answer was refused: the session is fine.
            return RemoteError(too_large_reason(self.budget.limit), server=server)
        return None

    def connect_failure(self, exc: Exception) -> ConnectFailure | None:
        """A refused address or an oversized answer while connecting; never worth the other transport."""
        server = self.endpoint.server
        if self.endpoint.auth is not None and (why := self.endpoint.auth.needs_login) is not None:
            # Only a person can unblock it: no other transport, and no retry timer.
            return ConnectFailure(NeedsLogin(why, server=server), try_other_transport=False)
        if self.endpoint.auth is not None and (why := self.endpoint.auth.refused) is not None:
            # The server refuses the token for scopes it holds: neither a timer nor the other
            # transport changes that. (A call refused so fails alone: the connection is fine.)
            return ConnectFailure(AccessRefused(why, server=server), try_other_transport=False)
        if self.endpoint.auth is None and not self.endpoint.headers and self.trace.login_challenge:
            # Added without credentials, and it takes a bearer token: a login can get one.
            return ConnectFailure(
                NeedsLogin("this server needs a login", server=server), try_other_transport=False
            )
        if (refusal := find_refusal(exc)) is not None:
            return ConnectFailure(ConnectFailed(refusal.reason, server=server), try_other_transport=False)
        if self.cuts() or oversized_event(exc):
            limit = format_size(self.event_limit() if self.transport == "sse" else self.budget.limit)
            reason = f"the server's answer is larger than {limit}, the most this host reads"
            return ConnectFailure(ConnectFailed(reason, server=server), try_other_transport=False)
        return None

    def event_limit(self) -> int:
        if self.transport == "sse":
            return min(SSE_TRANSPORT_EVENT_LIMIT, self.settings.max_result_bytes)
        return self.settings.max_result_bytes
