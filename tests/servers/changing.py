"""What a server whose tools change does: it redefines a tool, and tells its clients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

__all__ = ["redefine", "tell_tools_changed"]


def redefine(
    server: MCPServer, fn: Callable[..., Any], *, name: str | None = None, **definition: Any
) -> None:
    """Give ``server``'s tool ``name`` (``fn``'s own name by default) a new function and
    definition (``MCPServer.add_tool``'s arguments)."""
    server.remove_tool(name or fn.__name__)
    server.add_tool(fn, name=name, **definition)


async def tell_tools_changed(ctx: Context) -> None:
    """Notify the clients that the tool listing changed, on each protocol's channel."""
    await ctx.session.send_tool_list_changed()  # 2025-11-25: outside any request's stream
    await ctx.notify_tools_changed()  # 2026-07-28: to subscriptions/listen streams
