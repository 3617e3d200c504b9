"""Tools that answer with the Authorization header of the request they serve, encoded as a careless
server might: the forms a redactor must still find a credential in.

    server.add_tool(mime)   # a tool named after the function, described by its docstring
"""

from __future__ import annotations

import base64

from mcp.server.mcpserver import Context

__all__ = ["dump", "header", "mime"]


def header(ctx: Context) -> bytes:
    """The request's Authorization header as a whole header line."""
    return f"Authorization: {(ctx.headers or {}).get('authorization')}\r\n".encode()


def mime(ctx: Context) -> str:
    """The header in base64 with MIME's line breaks."""
    return "header:\n" + base64.encodebytes(header(ctx)).decode()


def dump(ctx: Context) -> str:
    """The header in upper-case hex, bytes separated by colons."""
    return "hex: " + ":".join(f"{byte:02X}" for byte in header(ctx))
