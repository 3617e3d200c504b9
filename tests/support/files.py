"""A small MCP server whose one tool "writes a file": it records every call that reaches it, so a
test can tell whether a call the owner denied ever got there."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

__all__ = ["ARGUMENTS", "files_server"]

ARGUMENTS = {"path": "notes/today.md", "text": "a line for the file"}
"""Arguments of a call of its ``write`` tool."""


def files_server(calls: list[dict[str, Any]]) -> MCPServer:
    """The server named ``files``; each call of ``write`` is appended to ``calls``."""
    server = MCPServer("files")

    @server.tool()
    def write(path: str, text: str) -> str:
        """Write a file."""
        calls.append({"path": path, "text": text})
        return f"wrote {len(text)} characters to {path}"

    return server
