"""Connecting to real MCP servers on loopback, calling their tools, and failing clearly."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import pytest
from anyio.abc import TaskGroup
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ListToolsResult, PaginatedRequestParams, TextContent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from playa.core import MIN_SECRET_LENGTH
from playa.exceptions import CallFailed, ConfigError, ConnectFailed, NeedsLogin, RemoteError, RemoteTimeout
from playa.mcp_remote.transport import (
    HANDSHAKE,
    MAX_REASON,
    Connection,
    ConnectionSettings,
    Connector,
    EgressPolicy,
    Endpoint,
    redacted,
)
from servers.python_servers import (
    LOOPBACK,
    OneProtocol,
    RecordingServer,
    RunningServer,
    blackhole,
    buffered,
    closed_port,
    recording_http_server,
    send_answer,
    serve_asgi,
    serve_mcp,
)

pytestmark = pytest.mark.anyio

TOKEN = "s3cr3t-t0ken-value"
# Healthy servers get generous bounds: a busy machine must not fail the tests. Only the bound
# under test is short (SHORT_CONNECT, SHORT_CLOSE), and asserted as a lower bound.
HEALTHY = ConnectionSettings(connect_timeout=15.0, call_timeout=15.0, close_timeout=5.0)
SHORT_CONNECT = ConnectionSettings(connect_timeout=0.5, call_timeout=15.0, close_timeout=5.0)
SHORT_CLOSE = ConnectionSettings(connect_timeout=15.0, call_timeout=15.0, close_timeout=0.5)


@dataclass
class Gates:
    """Lets a test see a tool start, and decide when it may finish."""

    entered: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)


class PagedServer(MCPServer):
    """Lists its tools one per page; with ``endless``, every page points to a next one."""

    def __init__(self, *, endless: bool = False) -> None:
        super().__init__("paged")
        self.endless = endless

    async def _handle_list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        tools = await self.list_tools()
        start = int(params.cursor) if params is not None and params.cursor else 0
        if self.endless:
            return ListToolsResult(tools=tools[:1], next_cursor="0")
        more = start + 1 < len(tools)
        return ListToolsResult(tools=tools[start : start + 1], next_cursor=str(start + 1) if more else None)


class HangOnDelete:
    """ASGI middleware that never answers a DELETE (a session close) until ``release`` is set."""

    def __init__(self, app: ASGIApp, release: anyio.Event) -> None:
        self._app = app
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            await self._release.wait()
        await self._app(scope, receive, send)


class HangOnProbe:
    """ASGI middleware that leaves every request at a modern protocol version unanswered until ``release``."""

    def __init__(self, app: ASGIApp, release: anyio.Event) -> None:
        self._app = app
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        version = dict(scope.get("headers", [])).get(b"mcp-protocol-version", b"").decode()
        if scope["type"] == "http" and version in MODERN_PROTOCOL_VERSIONS:
            await self._release.wait()
        await self._app(scope, receive, send)


def make_server(gates: Gates | None = None, server: MCPServer | None = None) -> MCPServer:
    gates = gates if gates is not None else Gates()
    server = server if server is not None else MCPServer("demo")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool()
    def fail(message: str) -> str:
        """Always fail."""
        raise ToolError(message)

    @server.tool()
    async def wait() -> str:
        """Block until the test releases it."""
        gates.entered.set()
        await gates.release.wait()
        return "released"

    return server


def text_of(result: object) -> str:
    content = getattr(result, "content", [])
    return "".join(block.text for block in content if isinstance(block, TextContent))


def endpoint(url: str, **kwargs: object) -> Endpoint:
    return Endpoint(server="demo", url=url, **kwargs)  # type: ignore[arg-type]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def tool_lists(served: RunningServer) -> int:
    return sum(1 for request in served.requests if request.rpc_method == "tools/list")


async def test_a_streamable_http_server_is_connected_with_its_tools_listed_and_called(
    task_group: TaskGroup,
) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server()) as served:
            connection = await Connector(HEALTHY).connect(endpoint(served.url), task_group)
            try:
                assert connection.transport == "streamable-http"
                assert sorted(tool.name for tool in connection.tools) == ["add", "fail", "wait"]
                result = await connection.call_tool("add", {"a": 2, "b": 3})
                assert text_of(result) == "5"
                assert result.is_error is False
            finally:
                await connection.aclose()
            assert connection.closed


async def test_a_modern_server_is_probed_once_and_then_spoken_to_without_a_handshake(
    task_group: TaskGroup,
) -> None:
    # Its discover answer stays fresh for a minute: until then, what it said is reused.
    fresh = {"server/discover": CacheHint(ttl_ms=60_000, scope="private")}
    server = make_server(server=MCPServer("demo", instructions="Add with add.", cache_hints=fresh))
    with anyio.fail_after(10):
        async with serve_mcp(server) as served:
            connector = Connector(HEALTHY)
            first = await connector.connect(endpoint(served.url), task_group)
            assert first.protocol in MODERN_PROTOCOL_VERSIONS
            await first.aclose()
            # No session to open or delete: the probe, then the listing.
            assert [(r.method, r.rpc_method) for r in served.requests] == [
                ("POST", "server/discover"),
                ("POST", "tools/list"),
            ]
            assert connector.remembered_protocol(served.url) == first.protocol

            served.requests.clear()
            second = await connector.connect(endpoint(served.url), task_group)
            assert second.protocol == first.protocol
            assert second.instructions == "Add with add."
            assert text_of(await second.call_tool("add", {"a": 2, "b": 3})) == "5"
            await second.aclose()
            # What it said of itself is known, its capabilities too: changes are still followed.
            methods = [r.rpc_method for r in served.requests]
            assert [m for m in methods if m != "subscriptions/listen"] == ["tools/list", "tools/call"]
            assert "subscriptions/listen" in methods


async def test_a_modern_server_whose_discover_answer_is_not_to_be_kept_is_asked_again_at_each_connect(
    task_group: TaskGroup,
) -> None:
    # ttlMs 0 (the default): what the server says of itself, its instructions too, is asked anew.
    server = make_server(server=MCPServer("demo", instructions="first"))
    with anyio.fail_after(10):
        async with serve_mcp(server) as served:
            connector = Connector(HEALTHY)
            await (await connector.connect(endpoint(served.url), task_group)).aclose()
            server._lowlevel_server.instructions = "second"  # pyright: ignore[reportPrivateUsage]
            served.requests.clear()
            second = await connector.connect(endpoint(served.url), task_group)
            await second.aclose()
            assert second.instructions == "second"
            assert [r.rpc_method for r in served.requests] == ["server/discover", "tools/list"]


async def test_an_older_server_gets_the_handshake_and_later_connects_skip_the_probe(
    task_group: TaskGroup,
) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server(), protocols="handshake") as served:
            connector = Connector(HEALTHY)
            first = await connector.connect(endpoint(served.url), task_group)
            assert first.protocol not in MODERN_PROTOCOL_VERSIONS
            await first.aclose()
            assert [r.rpc_method for r in served.requests][:2] == ["server/discover", "initialize"]
            assert connector.remembered_protocol(served.url) == HANDSHAKE

            served.requests.clear()
            second = await connector.connect(endpoint(served.url), task_group)
            assert text_of(await second.call_tool("add", {"a": 2, "b": 3})) == "5"
            await second.aclose()
            # The session's listening GET runs beside these.
            assert [r.rpc_method for r in served.requests if r.method != "GET"] == [
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/call",
                None,  # the session's DELETE
            ]


async def test_a_probe_that_is_never_answered_leaves_the_handshake_for_the_next_connect(
    task_group: TaskGroup,
) -> None:
    release = anyio.Event()
    app = HangOnProbe(make_server().streamable_http_app(host=LOOPBACK), release)
    with anyio.fail_after(30):
        async with serve_asgi(app, path="/mcp") as served:
            # The first connect times out on the probe; the second, with the handshake, must not.
            connector = Connector(ConnectionSettings(connect_timeout=3.0, call_timeout=15.0))
            with pytest.raises(RemoteTimeout):
                await connector.connect(endpoint(served.url), task_group)
            assert connector.remembered_protocol(served.url) == HANDSHAKE

            connection = await connector.connect(endpoint(served.url), task_group)
            assert connection.protocol not in MODERN_PROTOCOL_VERSIONS
            assert text_of(await connection.call_tool("add", {"a": 3, "b": 4})) == "7"
            await connection.aclose()
            release.set()


@pytest.mark.parametrize(("before", "after"), [("both", "handshake"), ("handshake", "modern")])
async def test_a_server_that_changed_its_protocol_is_negotiated_again_at_once(
    task_group: TaskGroup, before: Literal["both", "handshake"], after: Literal["handshake", "modern"]
) -> None:
    connector = Connector(HEALTHY)
    with anyio.fail_after(10):
        async with serve_mcp(make_server(), protocols=before) as first:
            await (await connector.connect(endpoint(first.url), task_group)).aclose()
            port = urlsplit(first.url).port or 0
        remembered = connector.remembered_protocol(first.url)
        # The same URL, now served another way: what was remembered fails, and the same
        # connect negotiates again.
        async with serve_mcp(make_server(), port=port, protocols=after) as second:
            connection = await connector.connect(endpoint(second.url), task_group)
            assert text_of(await connection.call_tool("add", {"a": 1, "b": 1})) == "2"
            await connection.aclose()
            assert connection.transport == "streamable-http"
            assert connector.remembered_protocol(second.url) not in (remembered, None)
            assert "server/discover" in [r.rpc_method for r in second.requests]


async def test_a_session_opens_the_listening_stream_and_calls_still_answer(task_group: TaskGroup) -> None:
    # The server's requests outside a call (roots/list, ping, a question) come on that stream.
    with anyio.fail_after(10):
        async with serve_mcp(make_server(), protocols="handshake") as served:
            connection = await Connector(HEALTHY).connect(endpoint(served.url), task_group)
            assert text_of(await connection.call_tool("add", {"a": 40, "b": 2})) == "42"
            await connection.aclose()
            assert ("GET", None) in [(r.method, r.rpc_method) for r in served.requests]
            assert [(r.method, r.rpc_method) for r in served.requests if r.method != "GET"] == [
                ("POST", "server/discover"),
                ("POST", "initialize"),
                ("POST", "notifications/initialized"),
                ("POST", "tools/list"),
                ("POST", "tools/call"),
                ("DELETE", None),
            ]


@pytest.mark.parametrize("protocols", ["both", "handshake"])
@pytest.mark.parametrize("json_response", [False, True], ids=["event-stream", "json"])
async def test_a_session_keeps_one_http_connection_from_handshake_to_close(
    task_group: TaskGroup, json_response: bool, protocols: Literal["both", "handshake"]
) -> None:
    # The SDK client stops reading an answer's event stream at the answer, and never reads the
    # empty body of a notification's 202: unless the rest is read, httpx2 drops the connection
    # and the next request opens a new one (over HTTPS, a TLS handshake each time).
    with anyio.fail_after(10):
        async with serve_mcp(make_server(), json_response=json_response, protocols=protocols) as served:
            connection = await Connector(HEALTHY).connect(endpoint(served.url), task_group)
            for number in range(5):
                assert text_of(await connection.call_tool("add", {"a": number, "b": 1})) == str(number + 1)
            await connection.aclose()
            # The listening GET of a handshake session holds a connection of its own, as does
            # the subscriptions/listen POST of a 2026 one (opened at the first call, it may take
            # over the connection the session started on).
            streams = [
                r for r in served.requests if r.method == "GET" or r.rpc_method == "subscriptions/listen"
            ]
            requests = [r for r in served.requests if r not in streams]
            assert [r.rpc_method for r in requests].count("tools/call") == 5
            calls = [r for r in requests if r.rpc_method == "tools/call"]
            assert calls[0].client_port is not None
            assert {r.client_port for r in calls} == {calls[0].client_port}
            held = {r.client_port for r in streams}
            assert {r.client_port for r in requests} - held <= {calls[0].client_port}


class HoldAnswerStreamsOpen:
    """ASGI middleware that keeps each POST's event stream open after its last event, until ``release``."""

    def __init__(self, app: ASGIApp, release: anyio.Event) -> None:
        self._app = app
        self._release = release
        self.held = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        streaming = False

        async def send_but_hold_the_end(message: Any) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                streaming = (
                    dict(message["headers"]).get(b"content-type", b"").startswith(b"text/event-stream")
                )
            elif message["type"] == "http.response.body" and streaming and not message.get("more_body"):
                self.held += 1
                await self._release.wait()
            await send(message)

        await self._app(scope, receive, send_but_hold_the_end)


async def test_an_answer_stream_left_open_delays_neither_the_call_nor_the_close(
    task_group: TaskGroup,
) -> None:
    release = anyio.Event()
    # Only the handshake's sessions answer with event streams.
    app = HoldAnswerStreamsOpen(
        OneProtocol(make_server().streamable_http_app(host=LOOPBACK), "handshake"), release
    )
    with anyio.fail_after(10):
        async with serve_asgi(app, path="/mcp") as served:
            connection = await Connector(HEALTHY).connect(endpoint(served.url), task_group)
            for number in range(3):
                assert text_of(await connection.call_tool("add", {"a": number, "b": 1})) == str(number + 1)
            # Every answer came while its stream stayed open: the calls never waited for its end.
            assert not release.is_set()
            assert app.held >= 3
            started = time.monotonic()
            await connection.aclose()
            assert time.monotonic() - started < HEALTHY.close_timeout
            release.set()
    assert connection.closed


async def test_the_first_call_does_not_list_the_tools_again(task_group: TaskGroup) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server()) as served:
            connection = await Connector(HEALTHY).connect(endpoint(served.url), task_group)
            assert tool_lists(served) == 1
            await connection.call_tool("add", {"a": 1, "b": 1})
            await connection.call_tool("add", {"a": 1, "b": 2})
            assert tool_lists(served) == 1
            await connection.aclose()


async def test_a_tool_error_is_returned_as_a_result_and_keeps_the_connection(task_group: TaskGroup) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server()) as served:
            connection = await Connector(HEALTHY).connect(endpoint(served.url), task_group)
            result = await connection.call_tool("fail", {"message": "no luck"})
            assert result.is_error is True
            assert "no luck" in text_of(result)
            assert not connection.broken
            assert text_of(await connection.call_tool("add", {"a": 1, "b": 1})) == "2"
            await connection.aclose()


async def test_an_sse_only_server_is_reached_by_falling_back_and_the_fallback_is_remembered(
    task_group: TaskGroup,
) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server(), "sse") as served:
            connector = Connector(HEALTHY)
            first = await connector.connect(endpoint(served.url), task_group)
            assert first.transport == "sse"
            assert text_of(await first.call_tool("add", {"a": 20, "b": 22})) == "42"
            await first.aclose()
            assert connector.remembered_transport(served.url) == "sse"
            # The Streamable HTTP attempt posted to the SSE endpoint itself: the probe, and the
            # handshake the SDK falls back to.
            assert sum(1 for r in served.requests if r.method == "POST" and r.path == "/sse") == 2

            second = await connector.connect(endpoint(served.url), task_group)
            assert second.transport == "sse"
            assert sum(1 for r in served.requests if r.method == "POST" and r.path == "/sse") == 2
            await second.aclose()


async def test_a_forced_transport_is_honoured_without_fallback(task_group: TaskGroup) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server(), "sse") as served:
            connector = Connector(HEALTHY)
            with pytest.raises(ConnectFailed) as caught:
                await connector.connect(endpoint(served.url, transport="streamable-http"), task_group)
            assert caught.value.reason == "HTTP 405 (method not allowed: not an MCP endpoint)"
            assert caught.value.server == "demo"
            assert all(r.method != "GET" for r in served.requests)
            assert connector.remembered_transport(served.url) is None
            refused = len(served.requests)

            connection = await connector.connect(endpoint(served.url, transport="sse"), task_group)
            assert connection.transport == "sse"
            assert all(r.method != "POST" or r.path != "/sse" for r in served.requests[refused:])
            await connection.aclose()


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_bearer_protected_server_accepts_the_right_token(
    task_group: TaskGroup, transport: Literal["streamable-http", "sse"]
) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server(), transport, bearer=TOKEN) as served:
            target = endpoint(served.url, headers={"Authorization": f"Bearer {TOKEN}"})
            connection = await Connector(HEALTHY).connect(target, task_group)
            assert connection.transport == transport
            assert text_of(await connection.call_tool("add", {"a": 1, "b": 2})) == "3"
            await connection.aclose()


@dataclass
class Guarded:
    """A server behind a bearer token the tests never have, and the transport a client names."""

    transport: str
    served: RunningServer


@pytest.fixture(params=["auto", "sse"])
async def guarded(request: pytest.FixtureRequest) -> AsyncIterator[Guarded]:
    """Over SSE, or over Streamable HTTP for a client on ``auto``."""
    transport: str = request.param
    server_transport: Literal["streamable-http", "sse"] = "sse" if transport == "sse" else "streamable-http"
    async with serve_mcp(make_server(), server_transport, bearer="the-right-one") as served:
        yield Guarded(transport, served)


async def test_a_server_added_without_credentials_that_takes_a_bearer_token_needs_a_login(
    task_group: TaskGroup, guarded: Guarded
) -> None:
    # A bare Bearer challenge names no metadata: a 2025-03-26 server keeps its authorization
    # server at its origin (metadata or the default endpoints), and the login finds it there.
    transport, served = guarded.transport, guarded.served
    with anyio.fail_after(10):
        with pytest.raises(NeedsLogin) as caught:
            await Connector(HEALTHY).connect(endpoint(served.url, transport=transport), task_group)
        assert caught.value.reason == "this server needs a login"
        if transport == "auto":
            # Only a login helps: no SSE attempt.
            assert {(r.method, r.path) for r in served.requests} == {("POST", "/mcp")}


async def test_a_wrong_bearer_fails_with_401_and_never_shows_the_token(
    task_group: TaskGroup, guarded: Guarded
) -> None:
    transport, served = guarded.transport, guarded.served
    with anyio.fail_after(10):
        target = endpoint(served.url, transport=transport, headers={"Authorization": f"Bearer {TOKEN}"})
        with pytest.raises(ConnectFailed) as caught:
            await Connector(HEALTHY).connect(target, task_group)
        assert caught.value.reason == "HTTP 401 (unauthorized: check the credentials)"
        assert TOKEN not in str(caught.value)
        assert TOKEN not in repr(caught.value)
        assert TOKEN not in repr(target)
        assert "Authorization" in repr(target)
        if transport == "auto":
            # An auth failure is not a reason to try SSE: it would fail the same way. (The
            # SDK follows a refused probe with the handshake: two POSTs.)
            assert [(r.method, r.path) for r in served.requests] == [("POST", "/mcp")] * 2


async def test_a_closed_port_is_refused_quickly_and_leaves_nothing_behind(task_group: TaskGroup) -> None:
    connector = Connector(HEALTHY)
    await connector.ssl_context()  # built once per connector; not a per-connection resource
    fds, tasks = open_fds(), len(asyncio.all_tasks())
    with anyio.fail_after(5):
        async with closed_port() as url:
            started = time.monotonic()
            with pytest.raises(ConnectFailed) as caught:
                await connector.connect(endpoint(url), task_group)
            elapsed = time.monotonic() - started
    assert caught.value.reason == "connection refused"
    assert elapsed < HEALTHY.connect_timeout  # refused, never waited out
    assert open_fds() == fds
    assert len(asyncio.all_tasks()) == tasks


async def test_a_server_that_never_answers_times_out_within_the_connect_timeout(
    task_group: TaskGroup,
) -> None:
    connector = Connector(SHORT_CONNECT)
    await connector.ssl_context()
    fds, tasks = open_fds(), len(asyncio.all_tasks())
    with anyio.fail_after(10):
        async with blackhole() as hole:
            started = time.monotonic()
            with pytest.raises(RemoteTimeout) as caught:
                await connector.connect(endpoint(hole.url), task_group)
            elapsed = time.monotonic() - started
            assert hole.accepted >= 1
    assert caught.value.reason == "timed out after 0.5 s"
    assert elapsed >= 0.5
    assert open_fds() == fds
    assert len(asyncio.all_tasks()) == tasks


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_server_killed_mid_call_fails_the_call_and_a_later_connect_succeeds(
    task_group: TaskGroup, transport: Literal["streamable-http", "sse"]
) -> None:
    gates = Gates()
    connector = Connector(HEALTHY)
    with anyio.fail_after(10):
        async with serve_mcp(make_server(gates), transport) as served:
            connection = await connector.connect(endpoint(served.url), task_group)
            outcome: list[BaseException] = []

            async def call() -> None:
                try:
                    await connection.call_tool("wait", {})
                except RemoteError as exc:
                    outcome.append(exc)

            async with anyio.create_task_group() as calls:
                calls.start_soon(call)
                await gates.entered.wait()
                await served.kill()
            port = served.port

        assert len(outcome) == 1
        assert isinstance(outcome[0], CallFailed)
        assert outcome[0].reason == "server closed the connection"
        assert connection.broken
        with pytest.raises(CallFailed):
            await connection.call_tool("add", {"a": 1, "b": 1})
        await connection.aclose()
        assert connection.closed

        async with serve_mcp(make_server(), transport, port=port) as back:
            again = await connector.connect(endpoint(back.url), task_group)
            assert again.transport == transport
            assert text_of(await again.call_tool("add", {"a": 1, "b": 1})) == "2"
            await again.aclose()


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_frozen_tool_times_out_by_the_call_timeout_and_breaks_the_connection(
    task_group: TaskGroup, transport: Literal["streamable-http", "sse"]
) -> None:
    gates = Gates()
    with anyio.fail_after(10):
        async with serve_mcp(make_server(gates), transport) as served:
            connection = await Connector(HEALTHY).connect(endpoint(served.url), task_group)
            started = time.monotonic()
            with pytest.raises(RemoteTimeout) as caught:
                await connection.call_tool("wait", {}, timeout=0.3)
            elapsed = time.monotonic() - started
            assert caught.value.reason == "timed out after 0.3 s"
            assert elapsed >= 0.3
            assert connection.broken
            started = time.monotonic()
            await connection.aclose()
            assert time.monotonic() - started < HEALTHY.close_timeout  # its task was already closing
            gates.release.set()


async def test_the_default_call_timeout_comes_from_the_settings(task_group: TaskGroup) -> None:
    gates = Gates()
    settings = ConnectionSettings(connect_timeout=15.0, call_timeout=0.2, close_timeout=5.0)
    with anyio.fail_after(10):
        async with serve_mcp(make_server(gates)) as served:
            connection = await Connector(settings).connect(endpoint(served.url), task_group)
            with pytest.raises(RemoteTimeout, match=r"timed out after 0\.2 s"):
                await connection.call_tool("wait", {})
            await connection.aclose()
            gates.release.set()


async def test_a_redirect_to_another_origin_is_not_followed_and_the_headers_stay_home(
    task_group: TaskGroup,
) -> None:
    with anyio.fail_after(10):
        async with (
            recording_http_server() as elsewhere,
            recording_http_server(307, headers={"Location": elsewhere.url + "?next=1"}) as redirecting,
        ):
            target = endpoint(redirecting.url, headers={"Authorization": f"Bearer {TOKEN}"})
            with pytest.raises(ConnectFailed) as caught:
                await Connector(HEALTHY).connect(target, task_group)
            # Where it pointed is the server's word: the detail, never the reason the prompt carries.
            assert caught.value.reason == "redirected to another URL, not followed"
            assert caught.value.detail == f"Location: {elsewhere.url}"
            assert elsewhere.requests == []
            # The probe and the handshake, each redirected and neither followed.
            assert [r.headers.get("authorization") for r in redirecting.requests] == [f"Bearer {TOKEN}"] * 2


async def test_a_failed_connect_does_not_cancel_the_other_connections_of_the_task_group(
    task_group: TaskGroup,
) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server()) as served, closed_port() as dead:
            connector = Connector(HEALTHY)
            alive = await connector.connect(endpoint(served.url), task_group)
            with pytest.raises(ConnectFailed):
                await connector.connect(endpoint(dead), task_group)
            assert text_of(await alive.call_tool("add", {"a": 2, "b": 2})) == "4"
            await alive.aclose()


async def test_closing_is_idempotent_and_a_closed_connection_refuses_calls(task_group: TaskGroup) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server()) as served:
            connection: Connection = await Connector(HEALTHY).connect(endpoint(served.url), task_group)
            await connection.aclose()
            await connection.aclose()
            assert connection.closed
            assert not connection.broken
            with pytest.raises(CallFailed, match="connection is closed"):
                await connection.call_tool("add", {"a": 1, "b": 1})


async def test_a_paginated_tool_listing_is_followed_to_its_end(task_group: TaskGroup) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server(server=PagedServer())) as served:
            connection = await Connector(HEALTHY).connect(endpoint(served.url), task_group)
            assert sorted(tool.name for tool in connection.tools) == ["add", "fail", "wait"]
            assert tool_lists(served) == 3
            await connection.call_tool("add", {"a": 1, "b": 1})
            assert tool_lists(served) == 3
            await connection.aclose()


async def test_an_endless_tool_listing_is_cut_at_the_page_limit(task_group: TaskGroup) -> None:
    settings = ConnectionSettings(connect_timeout=15.0, max_tool_pages=5)
    with anyio.fail_after(10):
        async with serve_mcp(make_server(server=PagedServer(endless=True))) as served:
            connection = await Connector(settings).connect(endpoint(served.url), task_group)
            assert tool_lists(served) == 5
            assert len(connection.tools) == 5
            await connection.aclose()


async def test_closing_is_bounded_when_the_server_never_answers_the_session_delete(
    task_group: TaskGroup,
) -> None:
    release = anyio.Event()
    # Only the handshake opens a session, which is closed with a DELETE.
    app = HangOnDelete(OneProtocol(make_server().streamable_http_app(host=LOOPBACK), "handshake"), release)
    with anyio.fail_after(10):
        async with serve_asgi(app, path="/mcp") as served:
            connection = await Connector(SHORT_CLOSE).connect(endpoint(served.url), task_group)
            started = time.monotonic()
            await connection.aclose()
            elapsed = time.monotonic() - started
            release.set()
    assert elapsed >= SHORT_CLOSE.close_timeout
    assert connection.closed


async def test_cancelling_the_owning_task_group_still_closes_the_session() -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server(), protocols="handshake") as served:
            async with anyio.create_task_group() as owner:
                connection = await Connector(HEALTHY).connect(endpoint(served.url), owner)
                owner.cancel_scope.cancel()
            assert connection.closed
            assert [r.method for r in served.requests if r.method == "DELETE"] == ["DELETE"]


async def test_one_watch_stops_every_connection_of_a_cancelled_group_and_ends_with_the_last() -> None:
    with anyio.fail_after(20):
        async with serve_mcp(make_server(), protocols="handshake") as served:
            connector = Connector(HEALTHY)
            # Every connection of this group ends: so does its watch, and the group with it.
            async with anyio.create_task_group() as quiet:
                first = await connector.connect(endpoint(served.url), quiet)
                await first.aclose()
                second = await connector.connect(endpoint(served.url), quiet)
                assert second.watch is not None and second.watch is not first.watch
                await second.aclose()
            async with anyio.create_task_group() as owner:
                connections = [await connector.connect(endpoint(served.url), owner) for _ in range(3)]
                assert len({id(connection.watch) for connection in connections}) == 1
                owner.cancel_scope.cancel()
            assert all(connection.closed for connection in connections)
            # Each session closed with its DELETE, the cancelled ones too.
            assert [r.method for r in served.requests if r.method == "DELETE"] == ["DELETE"] * 5


@pytest.fixture
async def env_proxy(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RecordingServer]:
    """A proxy answering 502 to all, named by every proxy variable of the environment."""
    async with recording_http_server(502) as proxy:
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, proxy.url.removesuffix("/mcp"))
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        yield proxy


async def test_environment_proxies_are_ignored_unless_trusted(
    task_group: TaskGroup, env_proxy: RecordingServer
) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server()) as served:
            target = endpoint(served.url, headers={"Authorization": f"Bearer {TOKEN}"})

            connection = await Connector(HEALTHY).connect(target, task_group)
            await connection.aclose()
            assert env_proxy.requests == []

            # The control: trusting the environment routes the same request through the proxy.
            trusting = Connector(ConnectionSettings(connect_timeout=15.0, trust_env=True))
            with pytest.raises(ConnectFailed, match="HTTP 502"):
                await trusting.connect(endpoint(served.url, transport="streamable-http"), task_group)
            assert env_proxy.requests
            assert {r.target for r in env_proxy.requests} == {served.url}


async def test_the_public_egress_policy_never_goes_through_an_environment_proxy(
    task_group: TaskGroup, env_proxy: RecordingServer
) -> None:
    with anyio.fail_after(10):
        async with serve_mcp(make_server()) as served:
            public = EgressPolicy(mode="public", allow=("127.0.0.1/32",))
            settings = ConnectionSettings(connect_timeout=15.0, trust_env=True, egress=public)
            connection = await Connector(settings).connect(endpoint(served.url), task_group)
            await connection.aclose()
            assert env_proxy.requests == []


async def test_one_ssl_context_serves_every_connection_of_a_connector() -> None:
    connector = Connector(HEALTHY)
    first = await connector.ssl_context()
    assert await connector.ssl_context() is first
    given = ssl.create_default_context()
    assert await Connector(HEALTHY, ssl_context=given).ssl_context() is given


def test_settings_refuse_timeouts_that_are_not_positive() -> None:
    with pytest.raises(ValueError, match="connect_timeout"):
        ConnectionSettings(connect_timeout=0)
    with pytest.raises(ValueError, match="call_timeout"):
        ConnectionSettings(call_timeout=float("inf"))
    with pytest.raises(ConfigError, match=r"ConnectionSettings\.max_tool_pages must be at least 1, got 0"):
        ConnectionSettings(max_tool_pages=0)


def test_an_endpoint_repr_shows_header_names_but_not_values_nor_url_secrets() -> None:
    target = Endpoint(
        server="demo",
        url="https://user:pw@example.test/mcp?key=abc",
        headers={"X-Api-Key": "value-123"},
    )
    text = repr(target)
    assert "X-Api-Key" in text
    assert "https://example.test/mcp" in text
    for secret in ("value-123", "pw", "key=abc"):
        assert secret not in text


def _quoting_app(status: int) -> ASGIApp:
    """An endpoint that answers every POST with an error quoting the Authorization header it got."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        quoted = headers.get(b"authorization", b"").decode()
        body, _ = await buffered(receive)
        request_id = json.loads(body or b"{}").get("id", 1)
        payload = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32010, "message": f"refused {quoted}"}}
        ).encode()
        await send_answer(send, status, payload)

    return app


async def test_a_connect_error_quoting_the_credential_is_redacted_everywhere(task_group: TaskGroup) -> None:
    token = "quoted-canary-token-4711"
    async with serve_asgi(_quoting_app(200), path="/mcp") as served:
        with pytest.raises(ConnectFailed) as caught:
            await Connector(HEALTHY).connect(
                endpoint(
                    served.url, transport="streamable-http", headers={"Authorization": f"Bearer {token}"}
                ),
                task_group,
            )
    rendered = "".join(traceback.format_exception(caught.value))
    assert caught.value.reason == "the server answered with an error"
    assert caught.value.detail is not None and "refused" in caught.value.detail
    assert token not in caught.value.reason and token not in caught.value.detail
    assert token not in str(caught.value)
    assert token not in rendered


async def test_connects_beyond_the_limit_wait_their_turn_and_their_timeout_starts_then(
    task_group: TaskGroup,
) -> None:
    # One slot, and a blackhole holding it for the whole connect timeout: the second connect
    # waits, then gets its own full timeout, and succeeds.
    settings = ConnectionSettings(
        connect_timeout=3.0, call_timeout=15.0, close_timeout=5.0, max_concurrent_connects=1
    )
    connector = Connector(settings)
    outcomes: dict[str, object] = {}
    async with blackhole() as hole, serve_mcp(make_server()) as served:
        started = time.monotonic()
        finished: dict[str, float] = {}

        async def attempt(name: str, url: str) -> None:
            try:
                outcomes[name] = await connector.connect(endpoint(url), task_group)
            except RemoteError as exc:
                outcomes[name] = exc
            finished[name] = time.monotonic() - started

        with anyio.fail_after(30):
            async with anyio.create_task_group() as attempts:
                attempts.start_soon(attempt, "dead", hole.url)
                await anyio.wait_all_tasks_blocked()
                attempts.start_soon(attempt, "alive", served.url)
        assert isinstance(outcomes["dead"], RemoteTimeout)
        alive = outcomes["alive"]
        assert isinstance(alive, Connection)
        # It waited for the slot (3 s), then still had its own whole timeout to connect.
        assert finished["alive"] >= 3.0
        await alive.aclose()


def test_a_reason_is_redacted_before_it_is_cut_so_no_head_of_a_key_survives() -> None:
    key = "Zq7Xw3KpL9vR2mN8bT4yF6hJ0cD5eG1a"
    endpoint = Endpoint(
        server="demo", url="http://127.0.0.1:9/mcp", transport="streamable-http", headers={"X-Key": key}
    )
    for at in range(MAX_REASON - len(key), MAX_REASON + 1):
        # An honest server quoting what it received, the key straddling the cut.
        error = redacted(ConnectFailed("r" * at + f"{key} was refused", server="demo"), endpoint)
        assert len(error.reason) <= MAX_REASON
        assert not any(key[:n] in error.reason for n in range(MIN_SECRET_LENGTH, len(key) + 1)), at
        assert error.reason.startswith("r" * min(at, MAX_REASON - 1))
