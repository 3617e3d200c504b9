"""The benchmarks' MCP server: an SDK ``MCPServer`` with ``echo`` and ``blob`` tools, in a process of its own.

``python -m bench.server --port 0`` binds 127.0.0.1, prints ``READY <port>`` once uvicorn
listens, and serves Streamable HTTP at ``/mcp`` (SSE responses, the SDK default; ``--json``
for JSON responses) and SSE at ``/sse``. It runs apart from the client so that the client's CPU
time is the client's alone.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import socket
import sys
from collections.abc import AsyncIterator

import anyio
import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.routing import Mount

from playa._asgi import bind

LOOPBACK = "127.0.0.1"


@functools.lru_cache(maxsize=4)
def _blob(size: int) -> str:
    """Text like a document's: words and numbers, no credential, the same for every call."""
    line = "".join(
        f"line {n:07d}: the quick brown fox jumps over the lazy dog\n" for n in range(size // 50 + 1)
    )
    return line[:size]


def build_server(discover_ttl_ms: int = 0) -> MCPServer:
    # ttlMs 0 (the SDK's default) says "revalidate": a client discovers on every connect.
    server = MCPServer("playa-bench", cache_hints={"server/discover": CacheHint(ttl_ms=discover_ttl_ms)})

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    def blob(size: int) -> str:
        """Return ``size`` characters of plain text (made once per size)."""
        return _blob(size)

    return server


def build_app(*, json_response: bool, discover_ttl_ms: int = 0) -> Starlette:
    mcp = build_server(discover_ttl_ms)
    # No idle timeout: the memory benchmark holds thousands of sessions open and quiet.
    http = mcp.streamable_http_app(
        json_response=json_response, host=LOOPBACK, session_idle_timeout=None, max_sessions=None
    )
    sse = mcp.sse_app(host=LOOPBACK)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with http.router.lifespan_context(http):
            yield

    # Streamable HTTP at /mcp (the app's own route), SSE at /sse and /messages/.
    return Starlette(routes=[*http.routes, Mount("/", app=sse)], lifespan=lifespan)


class _Server(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and sockets:
            print(f"READY {sockets[0].getsockname()[1]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="answer Streamable HTTP posts with JSON bodies")
    parser.add_argument(
        "--discover-ttl", type=int, default=0, metavar="MS", help="the ttlMs of its server/discover answer"
    )
    args = parser.parse_args()
    # Playa's own binding: Nagle's algorithm off on the accepted connections (see playa._asgi).
    sock = bind(LOOPBACK, args.port, backlog=4096)
    config = uvicorn.Config(
        build_app(json_response=args.json, discover_ttl_ms=args.discover_ttl),
        lifespan="on",
        log_config=None,
        log_level="error",
        access_log=False,
        timeout_graceful_shutdown=1,
        backlog=4096,
        limit_concurrency=None,
    )
    try:
        anyio.run(_Server(config).serve, [sock])
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
