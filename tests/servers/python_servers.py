"""Real servers on loopback for tests: the SDK's MCPServer over HTTP, and raw-socket fault servers.

Every helper is an async context manager that binds an ephemeral port on 127.0.0.1 (so tests
can run in parallel), runs in the caller's event loop, is ready when the ``async with`` body
starts (readiness is an event, never a sleep), and releases its sockets and tasks on exit.

    async with serve_mcp(make_server(), "sse", bearer="t0ken") as served:
        ...  # connect to served.url with "Authorization: Bearer t0ken"
        await served.kill()  # the server dies under its clients, as a crashed process would

Fault servers: ``closed_port()`` (connections are refused), ``blackhole()`` (accepts TCP, never
answers) and ``recording_http_server()`` (answers every request with one canned response and
records what it received, e.g. a 307 redirect to another origin).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from playa._asgi import bind

__all__ = [
    "LOOPBACK",
    "BearerAuthMiddleware",
    "Blackhole",
    "OneProtocol",
    "PostFilter",
    "RecordedRequest",
    "RecordingServer",
    "RunningServer",
    "ServedRequest",
    "blackhole",
    "buffered",
    "closed_port",
    "json_or_none",
    "recording_http_server",
    "send_answer",
    "serve_asgi",
    "serve_mcp",
    "tcp_server",
]

LOOPBACK = "127.0.0.1"
_READY_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0


async def send_answer(
    send: Send,
    status: int,
    body: bytes,
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    content_type: bytes = b"application/json",
) -> None:
    """Answer an HTTP request with ``status``, ``body`` of ``content_type`` and ``headers``."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BearerAuthMiddleware:
    """ASGI middleware that answers 401 to any HTTP request without ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = b""
            for name, value in scope["headers"]:
                if name.lower() == b"authorization":
                    given = value
            if not hmac.compare_digest(given, self._expected):
                challenge = [(b"www-authenticate", b"Bearer")]
                await send_answer(send, 401, b"unauthorized", challenge, content_type=b"text/plain")
                return
        await self._app(scope, receive, send)


async def buffered(receive: Receive) -> tuple[bytes, Receive]:
    """Read a request's whole body; return it and a ``receive`` that hands it to the app again."""
    messages: list[Any] = []
    more = True
    while more:
        messages.append(await receive())
        more = messages[-1].get("type") == "http.request" and messages[-1].get("more_body", False)
    body = b"".join(message.get("body", b"") for message in messages)

    async def replay() -> Any:
        return messages.pop(0) if messages else await receive()

    return body, replay


def json_or_none(body: bytes) -> object:
    """A request body's JSON value, or None when it is not JSON."""
    try:
        return json.loads(body)
    except ValueError:
        return None


class PostFilter:
    """ASGI middleware that reads each POST's body before the server does: :meth:`answer` may answer
    the request itself; every request it leaves goes to the server as it came."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        body, replay = await buffered(receive)
        if not await self.answer(scope, body, receive, send):
            await self._app(scope, replay, send)

    async def answer(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        """Answer the POST whose body is ``body`` and say so, or leave it to the server (False)."""
        raise NotImplementedError


class OneProtocol(PostFilter):
    """ASGI middleware that makes a server of both protocols speak only one of them.

    ``"handshake"``: a request at a modern protocol version (``server/discover``, or any request
    that skips the handshake) is answered as a server that predates the 2026 protocol answers,
    HTTP 400 with a JSON-RPC error. ``"modern"``: an ``initialize`` is refused the same way, as
    by a server that dropped the handshake.
    """

    def __init__(self, app: ASGIApp, protocol: Literal["handshake", "modern"]) -> None:
        super().__init__(app)
        self._protocol = protocol

    async def answer(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        payload = json_or_none(body)
        payload = payload if isinstance(payload, dict) else {}
        version = dict(scope["headers"]).get(b"mcp-protocol-version", b"").decode()
        if self._protocol == "handshake":
            refused = version in MODERN_PROTOCOL_VERSIONS
            error = {"code": -32000, "message": "Bad Request: Server not initialized"}
        else:
            refused = payload.get("method") == "initialize"
            error = {"code": -32022, "message": "Unsupported protocol version"}
        if refused:
            await send_answer(
                send, 400, json.dumps({"jsonrpc": "2.0", "id": payload.get("id"), "error": error}).encode()
            )
        return refused


@dataclass(frozen=True)
class ServedRequest:
    """One HTTP request an MCP test server received: method, path, and the JSON-RPC method of a POST.

    ``client_port`` is the client's port: requests with the same one came over the same TCP connection.
    """

    method: str
    path: str
    rpc_method: str | None
    client_port: int | None = None


def _client_port(scope: Scope) -> int | None:
    client = scope.get("client")
    return int(client[1]) if client else None


class _RequestLog:
    """ASGI middleware that appends a ``ServedRequest`` for every HTTP request to ``log``."""

    def __init__(self, app: ASGIApp, log: list[ServedRequest]) -> None:
        self._app = app
        self._log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["method"] != "POST":
            self._log.append(ServedRequest(scope["method"], scope["path"], None, _client_port(scope)))
            await self._app(scope, receive, send)
            return
        body, replay = await buffered(receive)
        payload = json_or_none(body)
        rpc_method = payload.get("method") if isinstance(payload, dict) else None
        self._log.append(ServedRequest("POST", scope["path"], rpc_method, _client_port(scope)))
        await self._app(scope, replay, send)


class _InProcessUvicorn(uvicorn.Server):
    """A uvicorn server that signals readiness with an event and leaves signal handling to pytest."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn would take over SIGINT for the whole test process; Ctrl-C must still stop pytest.
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@dataclass
class RunningServer:
    """A server running on loopback: its base ``url`` (for MCP: the endpoint URL) and ``port``."""

    url: str
    port: int
    _server: _InProcessUvicorn = field(repr=False)
    requests: list[ServedRequest] = field(default_factory=list)
    """For ``serve_mcp``: every HTTP request received, in order."""
    _stopped: anyio.Event = field(repr=False, default_factory=anyio.Event)

    async def kill(self) -> None:
        """Stop at once, as a crashed process would: abort every connection, cancel every request.

        Clients see their connections reset mid-request. Idempotent.
        """
        self._abort_connections()
        for task in list(self._server.server_state.tasks):
            task.cancel()
        await self.stop()

    async def stop(self) -> None:
        """Stop gracefully (uvicorn's shutdown, bounded by a 1 s grace) and wait until it has. Idempotent."""
        self._server.should_exit = True
        with anyio.fail_after(_STOP_TIMEOUT):
            await self._stopped.wait()
        # Whatever outlived the grace period is closed now, so no socket outlives the server.
        self._abort_connections()

    def _abort_connections(self) -> None:
        for connection in list(self._server.server_state.connections):
            transport: asyncio.Transport | None = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()


@contextlib.asynccontextmanager
async def serve_asgi(
    app: ASGIApp, *, port: int = 0, path: str = "/", sock: socket.socket | None = None
) -> AsyncIterator[RunningServer]:
    """Serve an ASGI app with uvicorn in the current event loop, on 127.0.0.1.

    ``port=0`` picks a free port; pass a killed server's port to bring it back at the same URL.
    ``sock`` serves on a socket bound already (an app that must know its own URL is built after).
    The app's lifespan runs (the MCP Streamable HTTP app needs it). ``path`` is appended to
    the base URL in ``RunningServer.url``. On exit the server stops and its sockets are closed.
    """
    # Playa's own binding (SO_REUSEADDR, so a killed server's port can be taken again at once).
    if sock is None:
        sock = bind(LOOPBACK, port)
    bound_port: int = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_config=None,  # only the CLI configures logging
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server = _InProcessUvicorn(config)
    running = RunningServer(url=f"http://{LOOPBACK}:{bound_port}{path}", port=bound_port, _server=server)

    async def serve() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            sock.close()
            running._stopped.set()
            server.ready.set()  # a server that failed to start must not leave its starter waiting

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        with anyio.fail_after(_READY_TIMEOUT):
            await server.ready.wait()
        if not server.started:
            raise RuntimeError("the test server did not start")
        try:
            yield running
        finally:
            with anyio.CancelScope(shield=True):
                await running.stop()


@contextlib.asynccontextmanager
async def serve_mcp(
    server: MCPServer[Any],
    transport: Literal["streamable-http", "sse"] = "streamable-http",
    *,
    bearer: str | None = None,
    port: int = 0,
    json_response: bool = False,
    protocols: Literal["both", "handshake", "modern"] = "both",
) -> AsyncIterator[RunningServer]:
    """Serve an SDK ``MCPServer`` on loopback over Streamable HTTP (at ``/mcp``) or SSE only (at ``/sse``).

    ``RunningServer.url`` is the endpoint URL a client connects to, and ``RunningServer.requests``
    lists the requests it received (with the JSON-RPC method of each POST). With ``bearer``,
    every request without ``Authorization: Bearer <bearer>`` is answered 401. ``json_response``
    makes the Streamable HTTP server answer with JSON bodies instead of SSE streams;
    ``protocols`` narrows what it speaks to the ``initialize`` handshake or to the 2026 protocol
    (``OneProtocol``).
    ``port`` brings a killed server back at the same URL.
    """
    app: ASGIApp
    if transport == "streamable-http":
        app = server.streamable_http_app(json_response=json_response, host=LOOPBACK)
        if protocols != "both":
            app = OneProtocol(app, protocols)
        path = "/mcp"
    else:
        app = server.sse_app(host=LOOPBACK)
        path = "/sse"
    if bearer is not None:
        app = BearerAuthMiddleware(app, bearer)
    log: list[ServedRequest] = []
    async with serve_asgi(_RequestLog(app, log), port=port, path=path) as running:
        running.requests = log
        yield running


@contextlib.asynccontextmanager
async def closed_port() -> AsyncIterator[str]:
    """A loopback URL whose port refuses connections.

    The port stays bound (without listening) for the whole block, so no other test can take it
    and the kernel answers every connection attempt with a reset.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((LOOPBACK, 0))
        yield f"http://{LOOPBACK}:{sock.getsockname()[1]}/mcp"
    finally:
        sock.close()


@dataclass
class Blackhole:
    """A server that accepts TCP connections and never sends a byte."""

    url: str
    accepted: int = 0


@contextlib.asynccontextmanager
async def blackhole() -> AsyncIterator[Blackhole]:
    """A loopback URL whose server accepts connections, reads nothing, and never answers.

    ``accepted`` counts the connections it took. On exit every connection is closed.
    """
    hole = Blackhole(url="")

    async def hold(stream: anyio.abc.SocketStream) -> None:
        hole.accepted += 1
        async with stream:
            await anyio.sleep_forever()

    async with tcp_server(hold) as hole.url:
        yield hole


@contextlib.asynccontextmanager
async def tcp_server(
    handle: Callable[[anyio.abc.SocketStream], Awaitable[None]], path: str = "/mcp"
) -> AsyncIterator[str]:
    """A raw TCP server on loopback that hands each connection to ``handle``: its ``http://`` URL
    with ``path``. On exit every connection it holds is cancelled."""
    listener = await anyio.create_tcp_listener(local_host=LOOPBACK, local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        try:
            yield f"http://{LOOPBACK}:{port}{path}"
        finally:
            tg.cancel_scope.cancel()


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request a ``RecordingServer`` received (header names lower-cased)."""

    method: str
    target: str
    headers: Mapping[str, str]
    body: bytes


@dataclass
class RecordingServer:
    """A raw HTTP server that records every request and answers each with the same response."""

    url: str
    requests: list[RecordedRequest] = field(default_factory=list)


_MAX_HEAD = 64 * 1024


async def _read_request(stream: anyio.abc.ByteStream) -> RecordedRequest | None:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > _MAX_HEAD:
            return None
        try:
            buffer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return None
    head, _, body = buffer.partition(b"\r\n\r\n")
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, target, _version = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        try:
            body += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            break
    return RecordedRequest(method=method, target=target, headers=headers, body=body)


@contextlib.asynccontextmanager
async def recording_http_server(
    status: int = 200,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    path: str = "/mcp",
) -> AsyncIterator[RecordingServer]:
    """A loopback HTTP/1.1 server that records each request and answers ``status`` with ``headers``, ``body``.

    Each connection serves one request and is closed. For a redirect to another origin:

        async with recording_http_server() as target, recording_http_server(
            307, headers={"Location": target.url}
        ) as redirecting: ...
    """
    recorder = RecordingServer(url="")
    reason = {200: "OK", 307: "Temporary Redirect", 308: "Permanent Redirect"}.get(status, "Status")
    response_headers = {"Content-Length": str(len(body)), "Connection": "close", **(headers or {})}
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in response_headers.items())
    response = head.encode("latin-1") + b"\r\n" + body

    async def answer(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            request = await _read_request(stream)
            if request is None:
                return
            recorder.requests.append(request)
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.send(response)

    async with tcp_server(answer, path) as recorder.url:
        yield recorder
