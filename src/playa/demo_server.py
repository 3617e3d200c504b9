"""A small MCP server on loopback to try Playa's remote MCP support with (`playa demo-server`).

It needs a bearer token, like most real servers, and its ``whoami`` tool echoes the request
headers it received: called from a Playa chat, the reply shows the token redacted.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import secrets
import struct
import sys
import zlib
from collections.abc import Callable
from typing import Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from starlette.types import ASGIApp, Receive, Scope, Send

from ._asgi import bind, serving

__all__ = ["DEFAULT_PORT", "DemoTransport", "build_app", "main", "serve"]

logger = logging.getLogger(__name__)

DemoTransport = Literal["streamable-http", "sse"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
_PATHS: dict[DemoTransport, str] = {"streamable-http": "/mcp", "sse": "/sse"}
# Bounds how long stopping waits for open streams (an SSE GET never ends by itself).
_GRACEFUL_SHUTDOWN_S = 3


def _tiny_png() -> bytes:
    """A 4x4 opaque orange PNG, built here so the package ships no binary file."""
    width = height = 4

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    rows = b"".join(b"\x00" + b"\xff\x8c\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


TINY_PNG = _tiny_png()


def _build_mcp_server() -> MCPServer:
    server = MCPServer(
        "playa-demo",
        instructions="A demo server for Playa: whoami shows the request headers the server received.",
    )

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Show the HTTP request headers this server received with the call, as JSON."""
        headers = ctx.headers or {}
        return json.dumps(dict(headers), indent=2, sort_keys=True)

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: int | float, b: int | float) -> int | float:
        """Add two numbers."""
        return a + b

    @server.tool()
    def tiny_image() -> Image:
        """Return a tiny 4x4 PNG image."""
        return Image(data=TINY_PNG, format="png")

    @server.tool()
    def fail(message: str = "this tool always fails") -> str:
        """Always fail, to show how a tool error reaches the agent."""
        raise ToolError(message)

    return server


class _RequireBearer:
    """ASGI middleware that answers 401 to every HTTP request without the right bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, credential = given.partition(b" ")
            # The scheme is case-insensitive (RFC 9110); the comparison is constant-time.
            if (
                not hmac.compare_digest(b"Bearer " + credential, self._expected)
                or scheme.lower() != b"bearer"
            ):
                await _unauthorized(send)
                return
        await self._app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="playa-demo"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def build_app(token: str, *, transport: DemoTransport, host: str = DEFAULT_HOST) -> ASGIApp:
    """The demo server as an ASGI app: MCP at ``/mcp`` (Streamable HTTP) or ``/sse``, behind a bearer token.

    ``host`` is where it will listen; on loopback the SDK also checks the Host header (DNS
    rebinding protection).
    """
    if not token:
        raise ValueError("the demo server needs a non-empty bearer token")
    server = _build_mcp_server()
    app: ASGIApp
    if transport == "streamable-http":
        app = server.streamable_http_app(host=host)
    else:
        app = server.sse_app(host=host)
    return _RequireBearer(app, token)


def _url(host: str, port: int, transport: DemoTransport) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{_PATHS[transport]}"


async def serve(
    host: str = DEFAULT_HOST,
    port: int = 0,
    token: str | None = None,
    transport: DemoTransport = "streamable-http",
    ready: Callable[[str, str], None] | None = None,
) -> None:
    """Run the demo server until cancelled.

    Uvicorn's signal handlers are off (see ``playa._asgi``): signals belong to the program that
    runs it, so Ctrl+C ends ``main`` with ``KeyboardInterrupt`` and SIGTERM ends the process.

    ``port=0`` picks a free port. ``ready(url, token)`` is called once the socket listens, with
    the real URL and the token (generated when none is given). Raises ``OSError`` when the
    address cannot be bound.
    """
    token = token or secrets.token_urlsafe(24)
    app = build_app(token, transport=transport, host=host)
    sock = bind(host, port)
    try:
        url = _url(host, sock.getsockname()[1], transport)
        async with serving(app, sock, lifespan="on", grace=_GRACEFUL_SHUTDOWN_S) as stopped:
            logger.info("demo MCP server listening on %s", url)
            if ready is not None:
                ready(url, token)
            await stopped.wait()
    finally:
        sock.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="playa demo-server",
        description="Run a small MCP server on loopback, behind a bearer token, to connect a Playa chat to.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (default: %(default)s)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port, 0 for any free one (default: %(default)s)"
    )
    parser.add_argument(
        "--sse", action="store_true", help="serve the legacy SSE transport at /sse instead of /mcp"
    )
    parser.add_argument("--token", help="bearer token to require (default: a new random one, printed)")
    return parser


def _announcement(url: str, token: str, transport: DemoTransport) -> str:
    flag = " --transport sse" if transport == "sse" else ""
    return "\n".join(
        [
            f"Playa demo MCP server: {url}",
            f"Bearer token: {token}",
            "In a Playa chat, send this, then give the token when asked (it is asked as a secret):",
            f"  /mcp_add demo {url}{flag} --bearer",
            "Tools: whoami, echo, add, tiny_image, fail. Stop with Ctrl+C.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``playa demo-server``: serve until Ctrl+C."""
    args = _parser().parse_args(argv)
    transport: DemoTransport = "sse" if args.sse else "streamable-http"

    def announce(url: str, token: str) -> None:
        print(_announcement(url, token, transport), flush=True)

    try:
        anyio.run(lambda: serve(args.host, args.port, args.token, transport, announce))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(
            f"playa demo-server: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    return 0
