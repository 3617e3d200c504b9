"""The connector: one per host, sharing the settings, one SSL context, and what each URL spoke last.

Which transport a connect tries first follows what worked for the URL before; a failed attempt
falls back to the other transport only when the server did not speak this one.

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
"""

from __future__ import annotations

import logging
import ssl
import weakref

import anyio
import httpx2
import mcp_types
from anyio.abc import TaskGroup
from mcp.client.caching import ResponseCacheStore
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...exceptions import ConnectFailed, RemoteTimeout
from ._connection import HANDSHAKE, NEGOTIATE, AttemptFailed, Connection, Elicit, OnTools
from ._egress import Resolver, guarded_transport
from ._endpoint import ConnectionSettings, Endpoint, TransportName, redacted, safe_cause
from ._errors import ConnectFailure
from ._owner_watch import OwnerWatch
from ._wire import Wire

__all__ = ["Connector"]

logger = logging.getLogger(__name__)


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
        # Per task group the connections run in, the one task that stops them when it is cancelled.
        self._watches: weakref.WeakKeyDictionary[TaskGroup, OwnerWatch] = weakref.WeakKeyDictionary()

    def remembered_transport(self, url: str) -> TransportName | None:
        """The transport that last worked for ``url`` with ``transport="auto"``, if any."""
        return self._spoken.get(url)

    def remembered_protocol(self, url: str) -> str | None:
        """How the next Streamable HTTP connect to ``url`` starts (HANDSHAKE or a modern version), if known."""
        return self._protocols.get(url)

    async def ssl_context(self) -> ssl.SSLContext:
        """The SSL context of every connection, built once (in a worker thread: it takes ~27 ms)."""
        if self._ssl_context is not None:
            return self._ssl_context  # every connect but the first: no lock, so no trip round the loop
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

    def _watch(self, connection: Connection, task_group: TaskGroup) -> None:
        """Have ``task_group``'s watch stop ``connection`` when the group is cancelled (one task a
        group, not one a connection)."""
        if connection.closed:
            return  # already ended: it would never be let go of
        watch = self._watches.get(task_group)
        if watch is None or watch.ended:
            watch = self._watches[task_group] = OwnerWatch()
            task_group.start_soon(watch.run)
        watch.watch(connection)
        connection.watch = watch

    async def connect(
        self,
        endpoint: Endpoint,
        task_group: TaskGroup,
        *,
        elicit: Elicit | None = None,
        on_tools: OnTools | None = None,
        tools_cache: ResponseCacheStore | None = None,
    ) -> Connection:
        """Connect to ``endpoint`` and list its tools, within the connect timeout as a whole.

        The connection's task runs in ``task_group``. ``elicit``, ``on_tools`` and ``tools_cache``:
        see ``Connection``. With ``transport="auto"``, Streamable HTTP is tried first (or whichever transport last worked for this URL), and the other one when
        the server rejects it.

        At most ``max_concurrent_connects`` connects run at once; the connect timeout counts
        from when this one starts.

        Raises:
            ConnectFailed: Connecting, the handshake or the tool listing failed.
            RemoteTimeout: It did not finish within the connect timeout.
        """
        async with self._slots:
            return await self._connect(endpoint, task_group, elicit, on_tools, tools_cache)

    async def _connect(
        self,
        endpoint: Endpoint,
        task_group: TaskGroup,
        elicit: Elicit | None,
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
            wire = Wire(
                endpoint, transport, settings=self.settings, ssl_context=ssl_context, resolve=self._resolve
            )
            connection = Connection(
                wire,
                mode=mode,
                elicit=elicit,
                on_tools=on_tools,
                tools_cache=tools_cache,
                prior_discover=self._fresh_discover(endpoint) if mode in MODERN_PROTOCOL_VERSIONS else None,
            )
            try:
                await task_group.start(connection._run, deadline)
            except AttemptFailed as failed:
                if transport == "streamable-http":
                    self._failed(endpoint.url, failed.failure)
                error = redacted(failed.failure.error, endpoint)
                logger.info("%s: connecting over %s failed: %s", endpoint.server, transport, error.reason)
                if failed.failure.try_other_transport:
                    continue
                raise error from safe_cause(error, failed.__cause__, endpoint)
            self._watch(connection, task_group)
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
