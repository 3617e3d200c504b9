"""The smallest useful MCP server: one tool that returns its text unchanged."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

__all__ = ["echo_server"]


def echo_server(name: str) -> MCPServer:
    """An SDK MCP server named ``name`` whose one tool, ``echo``, returns the text unchanged."""
    server = MCPServer(name)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return server
