# Long: one connection's life in the task that owns its session: connect, calls, tasks, and what the server tells it.
"""A connection to one remote MCP server: connect (Streamable HTTP or SSE), list tools, call, close.

``Connector.connect`` (``_connector``) makes a ``Connection`` whose tools are already listed. Each
connection lives in a task of the caller's task group, which enters the SDK's transport and session and exits them again (anyio cancel
scopes must be exited by the task that entered them); ``Connection.aclose`` asks that task to
stop and waits for it.

How a connect speaks to the server (transport, protocol version, handshake or not) is the
connector's choice (``_connector``); a connection is told its ``mode``.

A transport failure or a timeout during a call marks the connection ``broken`` and stops it; its
owner drops it and connects again for the next call. Calls are never retried here.

A call's time: ``call_timeout`` seconds, counted again from each progress notification the
server sends for it, but never past ``call_max`` seconds from its start; a question the server
asks a person stops the clock while the person answers. A tool that runs only as a task (see
``_tasks``) is called as one: the call follows the task until its time is up, and then hands
back a ``PendingTask`` that ``finish_task`` follows on, up to ``call_max``.

Tool-list changes are followed while connected (see ``_changes``): the connection's own task
lists the tools again and hands the new list to its owner's ``on_tools``. A 2026-07-28 server's
``subscriptions/listen`` stream is opened when the connection is first used, not at the connect:
a connection nobody calls holds no stream (a host keeps thousands of idle chats connected).
Once it is open, the tools are looked at again (from the cache while the server allows it),
since a change made before then was never sent, unless they were listed just before (the
window any stream's opening has); the first call waits for that, briefly.

A tools/list result is kept as its 2026-07-28 ``ttlMs`` and ``cacheScope`` allow, in the
response cache its owner hands each connection of one server (``tools_cache``): a reconnect
within the time needs no listing. A change the server announces evicts it, and the listing
after a change always asks the server.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, NoReturn, TypeVar

import anyio
import mcp_types
from anyio.abc import TaskStatus
from mcp.client import Client
from mcp.client.caching import CacheConfig, CacheMode, ResponseCacheStore
from mcp.client.session import ClientRequestContext
from mcp.client.subscriptions import Subscription

from ... import __version__
from ...exceptions import CallFailed, RemoteTimeout
from ._changes import ChangeFollower, list_tools, offers_changes
from ._clock import CallClocks, ProgressReport
from ._endpoint import TransportName, redacted, safe_cause
from ._errors import ConnectFailure, call_error, connect_error, timed_out
from ._owner_watch import OwnerWatch
from ._resource_updates import ResourceUpdates
from ._result_type import complete_by_default
from ._tasks import PendingTask, cancel_task, create_task, follow_task, task_required, unrunnable_reason
from ._wire import Wire

__all__ = ["HANDSHAKE", "NEGOTIATE", "AttemptFailed", "Connection", "Elicit", "OnTools"]

logger = logging.getLogger(__name__)

NEGOTIATE: Final = "auto"
"""The SDK's connect mode that probes ``server/discover`` and falls back to the handshake."""
HANDSHAKE: Final = "legacy"
"""The SDK's connect mode of the ``initialize`` handshake; any other mode is a modern version."""

_CLIENT_INFO: Final = mcp_types.Implementation(name="playa", version=__version__)
OnTools = Callable[["Connection"], Awaitable[None]]
"""Hears that a connection listed its tools again after the server said they changed."""
_Result = TypeVar("_Result", bound=mcp_types.Result)
Elicit = Callable[[mcp_types.ElicitRequestParams], Awaitable[mcp_types.ElicitResult | mcp_types.ErrorData]]
"""Answers a server's question (elicitation): the owner of the connection puts it to a person."""


class AttemptFailed(Exception):
    """One transport's connect attempt failed; carries the translated failure to ``Connector.connect``."""

    def __init__(self, failure: ConnectFailure) -> None:
        super().__init__(failure.error.reason)
        self.failure = failure


# Long: one live MCP session and every request made on it (calls, tasks, the extensions'
# requests, changes, close): the session's client and its error seam are this class's alone.
class Connection:
    """A live MCP session with one server, with its tools listed; made by ``Connector.connect``."""

    def __init__(
        self,
        wire: Wire,
        *,
        mode: str = HANDSHAKE,
        elicit: Elicit | None = None,
        on_tools: OnTools | None = None,
        tools_cache: ResponseCacheStore | None = None,
        prior_discover: mcp_types.DiscoverResult | None = None,
    ) -> None:
        """``wire``: the HTTP side, which says what the connection is to (endpoint, transport, settings).

        ``mode`` is the SDK's: NEGOTIATE, HANDSHAKE, or a modern protocol version to speak at once
        (with ``prior_discover``, the server's last ``server/discover`` answer, still fresh).

        ``elicit`` answers the server's questions (elicitation), the call clocks stopped while it
        does; without it they are declined at once, as sampling and roots always are.
        ``on_tools`` hears of every new listing after a change (``tools`` holds it by then).
        ``tools_cache`` keeps listings as the server allows, for this server's connections only
        (None: always list).
        """
        self.endpoint = wire.endpoint
        self.transport: TransportName = wire.transport
        self.mode = mode
        self.protocol: str | None = None
        """The protocol version agreed with the server, once connected."""
        self.instructions: str | None = None
        """What the server says about using it (``instructions``), once connected: its words, untrusted."""
        self._tools: Sequence[mcp_types.Tool] = ()
        self._by_name: dict[str, mcp_types.Tool] = {}
        self.discovered: mcp_types.DiscoverResult | None = None
        """The server's ``server/discover`` answer when this connect asked for it (not reused)."""
        self._settings = wire.settings
        self._wire = wire
        self._elicit_handler = elicit
        self._on_tools = on_tools
        self._tools_cache = tools_cache
        self._prior_discover = prior_discover
        self._clocks = CallClocks()
        self._client: Client | None = None
        self._broken_reason: str | None = None
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._changes = ChangeFollower(server=self.endpoint.server, relist=self._relist, stopped=self._stop)
        self._relisting: anyio.CancelScope | None = None
        self._resource_updates: ResourceUpdates | None = None
        self.watch: OwnerWatch | None = None
        """What stops this connection when its owner's task group is cancelled (set by the connector)."""

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"broken: {self._broken_reason}" if self.broken else "open"
        return (
            f"<Connection {self.endpoint.server!r} over {self.transport} ({self.protocol or self.mode}), "
            f"{len(self.tools)} tools, {state}>"
        )

    @property
    def tools(self) -> Sequence[mcp_types.Tool]:
        """The server's tools as last listed."""
        return self._tools

    @tools.setter
    def tools(self, tools: Sequence[mcp_types.Tool]) -> None:
        self._tools = tools
        # A call looks its tool up (does it run as a task?): by name, not by a scan of thousands.
        self._by_name = {tool.name: tool for tool in reversed(tools)}

    @property
    def resource_updates(self) -> ResourceUpdates:
        """The resources this connection subscribed to, and which of them the server said changed
        (made when first asked for: most connections never subscribe)."""
        if self._resource_updates is None:
            self._resource_updates = ResourceUpdates()
        return self._resource_updates

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
        if self._changes.wanted:
            await self._changes.start_listening()
        seconds = self._settings.call_timeout if timeout is None else timeout
        errors_before = self._wire.trace.errors
        cuts_before = self._wire.cuts()
        started = self._clocks.now()
        clock = self._clocks.start(seconds, started + max(seconds, self._settings.call_max), started)
        progressed = clock.progress_callback(on_progress)
        pending: PendingTask | None = None
        try:
            with clock:
                if not task_required(self._tool(name)):
                    return await client.call_tool(name, arguments, progress_callback=progressed)
                task = await create_task(client, name, arguments, timeout=seconds, on_progress=progressed)
                pending = PendingTask(server=server, tool=name, task=task, started=started)
                return await follow_task(
                    client, pending, on_progress, poll_timeout=self._settings.call_timeout
                )
        except Exception as exc:  # boundary: every SDK and httpx2 failure is translated at this seam
            self._call_failed(exc, cuts_before, errors_before, seconds)
        # Only reached when the scope's deadline cancelled the call.
        assert clock.expired
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

    @property
    def capabilities(self) -> mcp_types.ServerCapabilities | None:
        """What the server said it offers (its extensions too), while connected."""
        return self._client.server_capabilities if self._client is not None else None

    async def send(
        self, request: mcp_types.Request[Any, Any], result: type[_Result], *, timeout: float
    ) -> _Result:
        """One request beside the tool calls (``skills/list``, ``resources/read``), its answer typed.

        Raises as ``call_tool`` does (a transport failure or a timeout breaks the connection).
        """
        client = self._live_client()
        errors_before, cuts_before = self._wire.trace.errors, self._wire.cuts()
        try:
            with anyio.fail_after(timeout):
                return await client.session.send_request(
                    request, result, request_read_timeout_seconds=timeout
                )
        except Exception as exc:  # boundary: every SDK and httpx2 failure is translated at this seam
            self._call_failed(exc, cuts_before, errors_before, timeout)

    def listen_resources(self, uris: Sequence[str]) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """A 2026-07-28 ``subscriptions/listen`` stream of updates of ``uris`` (the SDK's, untranslated:
        its one reader, ``transport.follow_resource_updates``, only logs what it raises)."""
        return self._live_client().listen(resource_subscriptions=uris)

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
        error = self._wire.call_failure(exc, cuts_before) or call_error(
            exc,
            server=self.endpoint.server,
            trace=self._wire.trace,
            errors_before=errors_before,
            timeout=timeout,
        )
        if isinstance(error, CallFailed | RemoteTimeout):
            self._break(error.reason)
        raise redacted(error, self.endpoint) from safe_cause(error, exc, self.endpoint)

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
        errors_before = self._wire.trace.errors
        cuts_before = self._wire.cuts()
        call_max = self._settings.call_max
        try:
            with anyio.move_on_after(max(0.0, pending.started + call_max - anyio.current_time())):
                return await follow_task(
                    client, pending, on_progress, poll_timeout=self._settings.call_timeout
                )
        except Exception as exc:  # boundary: every SDK and httpx2 failure is translated at this seam
            self._call_failed(exc, cuts_before, errors_before, call_max)
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._settings.close_timeout):
            try:
                await cancel_task(client, pending.task_id, timeout=self._settings.close_timeout)
            except Exception as exc:  # boundary: a courtesy to the server; its failure changes nothing
                logger.debug("%s: cancelling task %s failed: %s", server, pending.task_id, type(exc).__name__)
        raise RemoteTimeout(f"the task did not finish within {call_max:g} s", server=server)

    def _tool(self, name: str) -> mcp_types.Tool | None:
        return self._by_name.get(name)

    def unrunnable(self, tool: mcp_types.Tool) -> str | None:
        """Why this host cannot call ``tool`` over this connection, or None when it can."""
        capabilities = self._client.server_capabilities if self._client is not None else None
        return unrunnable_reason(tool, self.protocol, capabilities)

    async def _elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """The SDK's elicitation callback: a request of the server's, or an input request of a 2026 result."""
        assert self._elicit_handler is not None
        with self._clocks.paused():
            return await self._elicit_handler(params)

    async def aclose(self) -> None:
        """Close the session (bounded by the settings' ``close_timeout``) and wait until it is. Idempotent."""
        self.stop()
        await self._done.wait()

    def _break(self, reason: str) -> None:
        if self._broken_reason is None:
            self._broken_reason = reason
            logger.info("%s: connection dropped: %s", self.endpoint.server, reason)
        # The connection's own task closes the session; the caller does not wait for it.
        self.stop()

    def stop(self) -> None:
        """Ask the connection's task to close the session, without waiting (``aclose`` waits); a
        listing in flight is given up."""
        self._stop.set()
        self._changes.stop()
        if self._relisting is not None:
            self._relisting.cancel()

    async def _on_message(self, message: object) -> None:
        """The SDK's message handler: a change of the tools (2025-11-25) is listed again, of the prompts told."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._changes.changed()
        elif isinstance(message, mcp_types.ResourceUpdatedNotification):
            if self._resource_updates is not None:  # none yet: nothing subscribed, nothing to hear
                self._resource_updates.heard(message.params.uri)
        elif isinstance(message, mcp_types.PromptListChangedNotification):
            self._changes.prompts_changed()

    def follow_prompts(self, heard: Callable[[], None]) -> None:
        """``heard`` hears each change of the server's prompts it announces (it must not wait)."""
        self._changes.on_prompts = heard

    async def _relist(self, client: Client, cache_mode: CacheMode, always: bool) -> None:
        """List the tools again and tell the owner (``always``, or when they differ); a stop gives it up."""
        server = self.endpoint.server
        before = self.tools
        with anyio.CancelScope() as self._relisting:
            try:
                with anyio.fail_after(self._settings.connect_timeout):
                    self.tools = await self._list(client, cache_mode)
                self._changes.listed()
            except Exception as exc:  # boundary: a failed listing keeps the tools known
                logger.info("%s: listing the changed tools failed: %s", server, type(exc).__name__)
                return
            if not always and self.tools == before:
                return
            logger.info("%s: the tool list changed: %d tools", server, len(self.tools))
            if self._on_tools is not None:
                try:
                    await self._on_tools(self)
                except Exception as exc:  # boundary: the owner's handler must not end the connection
                    logger.error("%s: handling a changed tool list failed: %s", server, type(exc).__name__)

    async def _list(self, client: Client, cache_mode: CacheMode = "use") -> tuple[mcp_types.Tool, ...]:
        return await list_tools(
            client,
            server=self.endpoint.server,
            max_pages=self._settings.max_tool_pages,
            cache_mode=cache_mode,
        )

    async def _enter(self, stack: contextlib.AsyncExitStack) -> Client:
        """Open the transport and the session, and list the tools; the session's client."""
        # The protocol is known once the session is entered, or up front for a modern version
        # spoken without a handshake.
        transport = complete_by_default(await self._wire.open(stack), lambda: self.protocol or self.mode)
        # The cache is this server's alone (one store per server of a chat, whose credentials are
        # fixed), so one partition serves; None lists every time.
        cache = (
            CacheConfig(store=self._tools_cache, partition="server", target_id=self.endpoint.server)
            if self._tools_cache is not None
            else None
        )
        client = Client(
            transport,
            mode=self.mode,
            prior_discover=self._prior_discover,
            cache=cache,
            client_info=_CLIENT_INFO,
            elicitation_callback=self._elicit if self._elicit_handler is not None else None,
            message_handler=self._on_message,
        )
        await stack.enter_async_context(client)
        self.protocol = client.protocol_version
        self.instructions = client.instructions
        if self.mode == NEGOTIATE:
            self.discovered = client.session.discover_result
        return client

    async def _run(self, deadline: float, *, task_status: TaskStatus[None]) -> None:
        """The connection's task: connect, list tools, report started, follow changes until stopped, close.

        Before ``task_status.started()`` a failure is raised (as ``AttemptFailed``) to the
        task that called ``TaskGroup.start``; after it, a failure only marks the connection
        broken, so one server's death never cancels its siblings in the task group.
        """
        started = handshaken = False
        # One scope for the whole life of the connection: its deadline bounds connect +
        # handshake + listing, is lifted once connected, and bounds the teardown at the end.
        scope = anyio.CancelScope(deadline=deadline)
        try:
            with scope:
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._enter(stack)
                    # A modern version is spoken without a handshake: until the listing is
                    # answered, nothing says the server speaks this transport (or this version).
                    handshaken = self.mode in (NEGOTIATE, HANDSHAKE)
                    # Listing through the session also primes its output-schema cache, so the
                    # first call does not list the tools again to validate its result.
                    self.tools = await self._list(client)
                    self._changes.listed()
                    self._changes.wanted = offers_changes(client)
                    await self._wire.listening_opened()
                    # From here on the owner's cancellation must not reach the SDK's tasks: it
                    # would cancel them one by one and the session would end without its
                    # DELETE. The owner's ``OwnerWatch`` turns that cancellation into a stop instead.
                    scope.shield = True
                    scope.deadline = math.inf
                    self._client = client
                    started = True
                    task_status.started()
                    try:
                        await self._changes.follow(client)
                    finally:
                        self._client = None
                        # Closing a session on a frozen server can wait out its read timeout
                        # (the DELETE): the close is bounded.
                        scope.deadline = anyio.current_time() + self._settings.close_timeout
        except Exception as exc:  # boundary: every SDK and httpx2 failure is translated at this seam
            if not started:
                raise AttemptFailed(self._connect_failure(exc, scope, handshaken)) from exc
            self._ended(exc)
        finally:
            self._client = None
            self._clocks.stop()
            self._done.set()
            if self.watch is not None:
                self.watch.closed(self)
        if not started:
            # The deadline passed, and the scope swallowed the cancellation it caused.
            raise AttemptFailed(
                ConnectFailure(timed_out(self._settings.connect_timeout, server=self.endpoint.server), False)
            )

    def _connect_failure(self, exc: Exception, scope: anyio.CancelScope, handshaken: bool) -> ConnectFailure:
        """What a failed connect attempt tells ``Connector.connect``."""
        server = self.endpoint.server
        if scope.cancel_called:
            return ConnectFailure(timed_out(self._settings.connect_timeout, server=server), False)
        failure = self._wire.connect_failure(exc) or connect_error(
            exc, server=server, trace=self._wire.trace, timeout=self._settings.connect_timeout
        )
        if handshaken:
            # It speaks this transport: the other one would only hide the real reason.
            failure = ConnectFailure(failure.error, try_other_transport=False)
        return failure

    def _ended(self, exc: Exception) -> None:
        """The session failed after it was connected: on its own (broken), or while closing."""
        server = self.endpoint.server
        failure = connect_error(
            exc, server=server, trace=self._wire.trace, timeout=self._settings.call_timeout
        )
        if self._stop.is_set():
            logger.debug("%s: closing failed: %s", server, failure.error.reason)
        else:
            # The transport died on its own, between calls.
            self._broken_reason = self._broken_reason or failure.error.reason
            logger.info("%s: connection ended: %s", server, failure.error.reason)
