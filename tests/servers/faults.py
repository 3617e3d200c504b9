"""Broken servers on loopback, one per way a remote MCP server can fail a client.

Each helper is an async context manager that serves on an ephemeral port of 127.0.0.1, is
ready when its block starts, and releases its sockets and tasks on exit.

Before MCP is spoken:
    ``closed_port()``      connections are refused (re-exported from ``python_servers``)
    ``blackhole()``        accepts TCP, never answers (re-exported)
    ``slammed_door()``     accepts TCP and closes the connection at once
    ``http_answer(...)``   answers every request with one status and body: 500, 401, an HTML page
    ``malformed_rpc(...)`` answers every JSON-RPC request with invalid JSON or a wrong shape
    ``drip_feed()``        answers 200, then trickles its body one byte per 100 ms, forever

While MCP is spoken (a real ``MCPServer``, with faults injected in front of it):
    ``faulty_mcp()``       its tools misbehave when called: see ``CALL_FAULTS``
    ``crowded_mcp()``      lists 10,000 tools, with invalid, long, duplicate names and huge schemas
                           (re-exported from ``listings``, as is ``listing_mcp(...)``)
    ``broken_listing_mcp()`` shakes hands, then answers the tool listing with a JSON-RPC error (re-exported)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import anyio
import anyio.abc
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from servers.listings import broken_listing_mcp, crowded_listing, crowded_mcp, listing_mcp
from servers.python_servers import (
    LOOPBACK,
    PostFilter,
    RunningServer,
    blackhole,
    buffered,
    closed_port,
    json_or_none,
    send_answer,
    serve_asgi,
    tcp_server,
)

__all__ = [
    "CALL_FAULTS",
    "DRIP_INTERVAL",
    "FaultyMcp",
    "blackhole",
    "broken_listing_mcp",
    "closed_port",
    "crowded_listing",
    "crowded_mcp",
    "drip_feed",
    "faulty_mcp",
    "http_answer",
    "listing_mcp",
    "malformed_rpc",
    "slammed_door",
]

DRIP_INTERVAL: Final = 0.1
"""Seconds between two bytes of a drip-feed: far below any read timeout."""

_DRIP_LIMIT: Final = 600
"""A drip ends after this many bytes (a minute), so a forgotten client cannot hold a server forever."""

_CHUNK: Final = 1024 * 1024


@contextlib.asynccontextmanager
async def slammed_door() -> AsyncIterator[str]:
    """A loopback URL whose server accepts each connection and closes it before reading a byte."""

    async def slam(stream: anyio.abc.SocketStream) -> None:
        await stream.aclose()

    async with tcp_server(slam) as url:
        yield url


def _static_app(status: int, content_type: str, body: bytes, challenge: bytes | None) -> ASGIApp:
    if challenge is None and status == 401:
        challenge = b"Bearer"
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge))

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        await buffered(receive)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


@contextlib.asynccontextmanager
async def http_answer(
    status: int, *, content_type: str = "text/plain", body: bytes = b"", challenge: bytes | None = None
) -> AsyncIterator[RunningServer]:
    """An HTTP server (uvicorn) that answers every request, on every path, with the same response.

    ``http_answer(500)``, ``http_answer(401)``, or an HTML page where MCP was expected:
    ``http_answer(200, content_type="text/html", body=b"<html>…")``. ``challenge`` is the
    ``WWW-Authenticate`` header's value (a 401 has ``Bearer`` unless told otherwise).
    """
    async with serve_asgi(_static_app(status, content_type, body, challenge), path="/mcp") as running:
        yield running


MalformedKind = Literal["invalid-json", "wrong-shape", "wrong-id"]


def _malformed_app(kind: MalformedKind) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        body, _ = await buffered(receive)
        if scope["method"] != "POST":
            await send_answer(send, 405, b"method not allowed", content_type=b"text/plain")
            return
        request = json_or_none(body)
        request_id = request.get("id") if isinstance(request, dict) else None
        if request_id is None:
            # A notification: acknowledged, as the protocol wants.
            await send_answer(send, 202, b"", content_type=b"text/plain")
            return
        answers: dict[MalformedKind, Any] = {
            "wrong-shape": {"jsonrpc": "2.0", "id": request_id, "result": ["not", "an", "object"]},
            "wrong-id": {"jsonrpc": "2.0", "id": f"not-{request_id}", "result": {}},
        }
        payload = (
            b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"protocolVers'
            if kind == "invalid-json"
            else json.dumps(answers[kind]).encode()
        )
        await send_answer(send, 200, payload)

    return app


@contextlib.asynccontextmanager
async def malformed_rpc(kind: MalformedKind) -> AsyncIterator[RunningServer]:
    """A server that answers every JSON-RPC request (the ``initialize`` first) with broken JSON-RPC.

    ``invalid-json``: a body cut in the middle; ``wrong-shape``: a result that is a list;
    ``wrong-id``: a response to a request that was never sent. GETs are answered 405.
    """
    async with serve_asgi(_malformed_app(kind), path="/mcp") as running:
        yield running


@dataclass
class Drip:
    """A drip-feed server: its ``url``, and how many bytes it has trickled so far."""

    url: str
    dripped: int = 0


@contextlib.asynccontextmanager
async def drip_feed() -> AsyncIterator[Drip]:
    """A raw HTTP server that answers 200 with a long JSON body, sent one byte per ``DRIP_INTERVAL``.

    Every read gets a byte long before any read timeout, but the response never ends (the
    body is ``_DRIP_LIMIT`` bytes short of its announced length when the drip stops).
    """
    drip = Drip(url="")
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {2 * _DRIP_LIMIT}\r\n\r\n".encode()
    )

    async def trickle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            request = b""
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                while b"\r\n\r\n" not in request:
                    request += await stream.receive()
            try:
                await stream.send(head)
                for _ in range(_DRIP_LIMIT):
                    await stream.send(b" ")
                    drip.dripped += 1
                    await anyio.sleep(DRIP_INTERVAL)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    async with tcp_server(trickle) as drip.url:
        yield drip


# Faults while MCP is spoken.

CallFault = Literal["freeze", "huge", "garbled", "misshapen", "cut", "drip", "sse-huge"]

CALL_FAULTS: Final[dict[CallFault, str]] = {
    "freeze": "the tool starts and never returns",
    "huge": "the result is a 50 MB JSON body",
    "sse-huge": "the result is one 50 MB server-sent event",
    "garbled": "the response body is not valid JSON",
    "misshapen": "the response is JSON-RPC, but its result is no CallToolResult",
    "cut": "the response's event stream is cut off mid-event",
    "drip": "the response trickles in one byte per 100 ms and never ends",
}
"""The tools of ``faulty_mcp`` and what each does when called. Its ``echo`` tool works."""

HUGE_SIZE: Final = 50 * 1024 * 1024


@dataclass
class FaultyMcp:
    """A running ``faulty_mcp``: its endpoint ``url``, and the calls of its faulty tools so far."""

    url: str
    calls: list[str] = field(default_factory=list)
    frozen: anyio.Event = field(default_factory=anyio.Event)
    """Set when the ``freeze`` tool has started."""


class _CallFaults(PostFilter):
    """ASGI middleware that answers ``tools/call`` of a faulty tool itself, and badly."""

    def __init__(self, app: ASGIApp, state: FaultyMcp) -> None:
        super().__init__(app)
        self._state = state

    async def answer(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        request = json_or_none(body)
        fault = _called_fault(request)
        if fault is None or fault == "freeze":
            return False
        assert isinstance(request, dict)
        self._state.calls.append(fault)
        await _FAULTS[fault](request["id"], receive, send)
        return True


def _called_fault(request: object) -> CallFault | None:
    if not isinstance(request, dict) or request.get("method") != "tools/call":
        return None
    params = request.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return next((fault for fault in CALL_FAULTS if fault == name), None)


def _result_prefix(request_id: object) -> bytes:
    return (
        b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"content": '
        b'[{"type": "text", "text": "'
    )


async def _huge(request_id: object, receive: Receive, send: Send) -> None:
    await _start(send, 200, "application/json")
    await _send_in_chunks(send, _result_prefix(request_id), HUGE_SIZE, b'"}]}}')


async def _sse_huge(request_id: object, receive: Receive, send: Send) -> None:
    await _start(send, 200, "text/event-stream")
    await _send_in_chunks(
        send, b"event: message\ndata: " + _result_prefix(request_id), HUGE_SIZE, b'"}]}}\n\n'
    )


async def _send_in_chunks(send: Send, prefix: bytes, size: int, suffix: bytes) -> None:
    chunk = b"x" * _CHUNK
    await send({"type": "http.response.body", "body": prefix, "more_body": True})
    for _ in range(size // _CHUNK):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": suffix, "more_body": False})


async def _garbled(request_id: object, receive: Receive, send: Send) -> None:
    await send_answer(send, 200, _result_prefix(request_id) + b"no closing quote")


async def _misshapen(request_id: object, receive: Receive, send: Send) -> None:
    payload = {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"content": "not a list", "isError": "perhaps", "structuredContent": 42},
    }
    await send_answer(send, 200, json.dumps(payload).encode())


class _CutStream(Exception):
    """Raised mid-response: uvicorn then closes the connection with the body unfinished."""


async def _cut(request_id: object, receive: Receive, send: Send) -> None:
    await _start(send, 200, "text/event-stream")
    await send(
        {"type": "http.response.body", "body": b'event: message\ndata: {"jsonrpc": ', "more_body": True}
    )
    raise _CutStream("the fault server cuts the stream here")


async def _drip(request_id: object, receive: Receive, send: Send) -> None:
    await _start(send, 200, "application/json")
    async with anyio.create_task_group() as tg:

        async def until_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(until_disconnect)
        for byte in _result_prefix(request_id)[:_DRIP_LIMIT]:
            await send({"type": "http.response.body", "body": bytes([byte]), "more_body": True})
            await anyio.sleep(DRIP_INTERVAL)
        tg.cancel_scope.cancel()
    # Only reached when the client stayed a whole minute: end the response, still invalid.
    with contextlib.suppress(Exception):
        await send({"type": "http.response.body", "body": b"", "more_body": False})


_FAULTS: Final[dict[CallFault, Callable[[object, Receive, Send], Awaitable[None]]]] = {
    "huge": _huge,
    "sse-huge": _sse_huge,
    "garbled": _garbled,
    "misshapen": _misshapen,
    "cut": _cut,
    "drip": _drip,
}


@contextlib.asynccontextmanager
async def faulty_mcp() -> AsyncIterator[FaultyMcp]:
    """A Streamable HTTP MCP server whose tools named in ``CALL_FAULTS`` fail when called.

    The handshake and the tool listing are the SDK's own and correct; ``echo`` works. ``freeze``
    runs in the SDK server and waits until the server stops; the others are answered by a
    middleware in front of the SDK app.
    """
    server = MCPServer("faulty")
    release = anyio.Event()
    state = FaultyMcp(url="")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def freeze() -> str:
        """Start, and never return."""
        state.frozen.set()
        await release.wait()
        return "released"

    for fault in CALL_FAULTS:
        if fault != "freeze":
            server.add_tool(_never_runs, name=fault, description=CALL_FAULTS[fault], structured_output=False)

    app = _CallFaults(server.streamable_http_app(host=LOOPBACK), state)
    async with serve_asgi(app, path="/mcp") as running:
        state.url = running.url
        try:
            yield state
        finally:
            release.set()


def _never_runs() -> str:
    """The middleware answers these calls before the server sees them."""
    return "the fault was not injected"


# ASGI helpers.


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _start(send: Send, status: int, content_type: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type.encode())],
        }
    )
