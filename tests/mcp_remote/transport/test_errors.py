"""A server's JSON-RPC error is the server's answer, whatever its code and whatever HTTP status carries it.

The connection stays. Its reason is Playa's fixed words; the server's own words are its detail.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

import anyio
import pytest
from anyio.abc import TaskGroup
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from starlette.types import Receive, Scope, Send

from playa.exceptions import CallFailed, RemoteError
from playa.mcp_remote import HostSecret
from playa.mcp_remote.transport import ANSWERED, Connector, Endpoint
from servers.greeting import greeting_server
from servers.python_servers import (
    LOOPBACK,
    PostFilter,
    RunningServer,
    json_or_none,
    send_answer,
    serve_asgi,
    serve_mcp,
)
from support.remote import HEALTHY, owner_chat

pytestmark = pytest.mark.anyio

TOKEN = "Zq7Xw3KpL9vR2mN8bT4yF6hJ0cD5eG1a"


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
                # Playa's words as the reason; the server's, with its code, as the detail.
                assert caught.value.reason == ANSWERED
                detail = caught.value.detail
                assert detail is not None and detail.startswith(f"error {code}: refused with {code}")
                # Cut once redacted, with a mark that it was.
                assert len(detail) <= 300 and detail.endswith("…")
                assert caught.value.explained == f"{ANSWERED} (the server said: {detail})"
                assert not connection.broken
                result = await connection.call_tool("ok", {})
                assert result.is_error is False
            finally:
                await connection.aclose()


# A JSON-RPC error in the body of an HTTP 4xx.


class StatusAnswers(PostFilter):
    """ASGI middleware: a call of ``refuse`` is answered with HTTP ``status`` and a JSON-RPC error
    whose message quotes the request's Authorization header; everything else goes to the server."""

    async def answer(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        request = json_or_none(body)
        params = request.get("params") if isinstance(request, dict) else None
        if not isinstance(request, dict) or not isinstance(params, dict) or params.get("name") != "refuse":
            return False
        arguments = params.get("arguments") or {}
        status = int(arguments.get("code", 400))
        authorization = dict(scope["headers"]).get(b"authorization", b"").decode()
        error = {"code": -32602, "message": f"invalid arguments\nfor {authorization}\x1b[2J: see the docs"}
        await send_answer(
            send, status, json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": error}).encode()
        )
        return True


@asynccontextmanager
async def status_answering_mcp() -> AsyncIterator[RunningServer]:
    """The SDK's server with ``refuse`` answered by ``StatusAnswers`` in front of it; ``ok`` works."""
    app = StatusAnswers(refusing_server().streamable_http_app(host=LOOPBACK))
    async with serve_asgi(app, path="/mcp") as running:
        yield running


@pytest.mark.parametrize("status", [400, 409, 422, 429])
async def test_a_json_rpc_error_in_a_4xx_body_is_a_tool_error_with_its_redacted_message_and_the_connection_stays(
    task_group: TaskGroup, status: int
) -> None:
    with anyio.fail_after(30):
        async with status_answering_mcp() as served:
            endpoint = Endpoint(
                server="strict",
                url=served.url,
                transport="streamable-http",
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            connection = await Connector(HEALTHY).connect(endpoint, task_group)
            try:
                with pytest.raises(RemoteError) as caught:
                    await connection.call_tool("refuse", {"code": status})
                assert not isinstance(caught.value, CallFailed)
                assert caught.value.reason == ANSWERED
                # One line, the terminal's escape gone, the quoted key redacted.
                assert (
                    caught.value.detail == "error -32602: invalid arguments for [redacted] [2J: see the docs"
                )
                assert not connection.broken
                assert (await connection.call_tool("ok", {})).is_error is False
            finally:
                await connection.aclose()


async def test_a_404_with_a_json_rpc_error_still_means_the_session_is_gone(task_group: TaskGroup) -> None:
    with anyio.fail_after(30):
        async with status_answering_mcp() as served:
            endpoint = Endpoint(server="strict", url=served.url, transport="streamable-http")
            connection = await Connector(HEALTHY).connect(endpoint, task_group)
            try:
                with pytest.raises(CallFailed) as caught:
                    await connection.call_tool("refuse", {"code": 404})
                assert caught.value.reason == "session expired (HTTP 404)"
                assert caught.value.detail is not None and "invalid arguments" in caught.value.detail
                assert connection.broken
            finally:
                await connection.aclose()


def asking_server() -> MCPServer:
    """The SDK's server with a tool that asks a question, which the stateless protocol cannot carry."""
    server = greeting_server()

    @server.tool()
    def ok() -> str:
        """Answer."""
        return "fine"

    return server


async def test_a_question_the_stateless_protocol_cannot_carry_is_the_servers_error_and_the_connection_stays(
    task_group: TaskGroup,
) -> None:
    with anyio.fail_after(30):
        async with serve_mcp(asking_server()) as served:
            endpoint = Endpoint(server="asking", url=served.url, transport="streamable-http")
            connection = await Connector(HEALTHY).connect(endpoint, task_group)
            try:
                assert connection.protocol == "2026-07-28"
                with pytest.raises(RemoteError) as caught:
                    await connection.call_tool("greet", {})
                assert not isinstance(caught.value, CallFailed)
                assert caught.value.reason == ANSWERED
                assert caught.value.detail is not None and "elicitation/create" in caught.value.detail
                assert not connection.broken
                assert (await connection.call_tool("ok", {})).is_error is False
            finally:
                await connection.aclose()


async def test_the_model_gets_the_4xx_error_as_a_tool_result_and_the_server_stays_available(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(60):
        async with status_answering_mcp() as served, owner_chat(data_dir, host_secret, "console:t") as chat:
            added = await chat.command(f"/mcp_add strict {served.url} --bearer {TOKEN}")
            assert added.startswith("Added strict: connected"), added
            reply = await chat.say('strict__refuse {"code": 400}')
            assert reply.text.startswith(
                "[offline model] strict__refuse failed:\nstrict__refuse failed: the server answered with an "
                "error (the server said: error -32602: invalid arguments for [redacted]"
            ), reply.text
            assert TOKEN not in reply.text
            # Kept: no reconnect, and the prompt still has it available.
            session = await chat.session()
            assert "- strict: available, 2 tools" in (session.prompt.get("Remote MCP servers") or "")
            listed = await chat.command("/mcp_list")
            assert listed.startswith("strict: connected over streamable-http, 2 tools\n"), listed
            assert "last call failed" not in listed
            assert (await chat.say("strict__ok")).text == "[offline model] strict__ok returned:\nfine"
