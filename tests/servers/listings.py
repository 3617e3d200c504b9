"""MCP servers on loopback whose tool listing is the test: a crowded one, a given one, a failing one."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from servers.python_servers import LOOPBACK, RunningServer, serve_asgi

__all__ = ["broken_listing_mcp", "crowded_listing", "crowded_mcp", "listing_mcp"]

_CROWDED_PAGE: Final = 500


class _CrowdedServer(MCPServer):
    """Lists a prebuilt tool listing, in pages, instead of its registered tools (``echo`` is among them).

    Pages keep each response under the SDK client's 1 MiB limit on one server-sent event, as a
    real server with this many tools has to.
    """

    def __init__(self, listing: list[mcp_types.Tool]) -> None:
        super().__init__("crowded")
        self._listing = listing

    async def _handle_list_tools(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + _CROWDED_PAGE
        more = end < len(self._listing)
        return mcp_types.ListToolsResult(
            tools=self._listing[start:end], next_cursor=str(end) if more else None
        )


def crowded_listing(count: int = 10_000) -> list[mcp_types.Tool]:
    """``count`` tools: ``echo`` (real), then names a provider would refuse and huge schemas.

    Among them: names with spaces, unicode and punctuation; 200-character names that differ
    only at their end; exact duplicates; a tool with 2,000 properties; one nested 60 deep.
    """
    plain = {"type": "object", "properties": {"x": {"type": "string"}}}
    tools = [
        mcp_types.Tool(
            name="echo",
            description="Return the text unchanged.",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        ),
        mcp_types.Tool(
            name="wide schema",
            input_schema={
                "type": "object",
                "properties": {f"p{i}": {"type": "string", "description": "d" * 100} for i in range(2000)},
            },
        ),
        mcp_types.Tool(name="deep schema", input_schema=_nested(60)),
        mcp_types.Tool(name="echo", description="a duplicate of echo", input_schema=plain),
        mcp_types.Tool(name="", input_schema=plain),
    ]
    makers: list[Callable[[int], str]] = [
        lambda i: f"tool number {i}",
        lambda i: f"outil-été-{i}-🛠",
        lambda i: "n" * 190 + f"{i:010d}",
        lambda i: f"dup.{i // 2}",
        lambda i: f"dup/{i // 2}",
    ]
    i = 0
    while len(tools) < count:
        name = makers[i % len(makers)](i)
        tools.append(mcp_types.Tool(name=name, description=f"tool {i}", input_schema=plain))
        i += 1
    return tools


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"inner": schema}}
    return schema


@contextlib.asynccontextmanager
async def crowded_mcp(count: int = 10_000) -> AsyncIterator[RunningServer]:
    """A Streamable HTTP MCP server listing ``crowded_listing(count)`` in pages; only ``echo`` can be called."""
    async with listing_mcp(crowded_listing(count)) as running:
        yield running


@contextlib.asynccontextmanager
async def listing_mcp(listing: list[mcp_types.Tool]) -> AsyncIterator[RunningServer]:
    """A Streamable HTTP MCP server listing ``listing`` as it is; only ``echo`` can be called."""
    server = _CrowdedServer(listing)

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    async with serve_asgi(server.streamable_http_app(host=LOOPBACK), path="/mcp") as running:
        yield running


class _BrokenListingServer(MCPServer):
    """Completes the handshake, then answers ``tools/list`` with a JSON-RPC error of ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__("broken-listing")
        self._message = message

    async def _handle_list_tools(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        raise MCPError(INTERNAL_ERROR, self._message)


@contextlib.asynccontextmanager
async def broken_listing_mcp(message: str = "the tool registry is down") -> AsyncIterator[RunningServer]:
    """A Streamable HTTP MCP server that shakes hands, then fails to list its tools (with ``message``)."""
    server = _BrokenListingServer(message)
    async with serve_asgi(server.streamable_http_app(host=LOOPBACK), path="/mcp") as running:
        yield running
