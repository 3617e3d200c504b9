"""A server's JSON-RPC error is the server's answer, whatever its code; the connection stays."""

from __future__ import annotations

from typing import Literal

import anyio
import pytest
from anyio.abc import TaskGroup
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from playa.exceptions import CallFailed, RemoteError
from playa.mcp_remote.transport._connection import Connector, Endpoint
from servers.python_servers import serve_mcp
from support.remote import HEALTHY

pytestmark = pytest.mark.anyio


def refusing_server() -> MCPServer:
    server = MCPServer("refusing")

    @server.tool()
    def refuse(code: int) -> str:
        """Answer with a JSON-RPC error of the given code."""
        raise MCPError(code, f"refused with {code}: " + "r" * 400)

    @server.tool()
    def ok() -> str:
        """Answer."""
        return "fine"

    return server


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
@pytest.mark.parametrize("code", [-32000, -32001, -32603, 1])
async def test_a_json_rpc_error_of_any_code_is_a_tool_error_and_the_connection_stays(
    task_group: TaskGroup, code: int, transport: Literal["streamable-http", "sse"]
) -> None:
    with anyio.fail_after(30):
        async with serve_mcp(refusing_server(), transport) as served:
            connection = await Connector(HEALTHY).connect(
                Endpoint(server="refusing", url=served.url, transport=transport), task_group
            )
            try:
                with pytest.raises(RemoteError) as caught:
                    await connection.call_tool("refuse", {"code": code})
                assert not isinstance(caught.value, CallFailed)
                assert caught.value.reason.startswith(f"server error {code}: refused with {code}")
                # Cut once redacted, with a mark that it was.
                assert len(caught.value.reason) <= 300 and caught.value.reason.endswith("…")
                assert not connection.broken
                result = await connection.call_tool("ok", {})
                assert result.is_error is False
            finally:
                await connection.aclose()
