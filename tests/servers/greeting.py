"""The SDK's server named ``asking``, whose tool ``greet`` asks the person's name: a server's
question (a form of one field) in the middle of a call.

    server = greeting_server()   # add the tools a test needs besides
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

__all__ = ["Name", "greet", "greeting_server"]


class Name(BaseModel):
    """The form ``greet`` asks for."""

    name: str


async def greet(ctx: Context) -> str:
    """Ask the person's name, and greet them."""
    result = await ctx.elicit("What is your name?", Name)
    if result.action == "accept":
        return f"hello {result.data.name}"
    return f"no name: {result.action}"


def greeting_server() -> MCPServer:
    """A server whose one tool is ``greet``."""
    server = MCPServer("asking")
    server.add_tool(greet)
    return server
