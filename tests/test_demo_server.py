from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from playa.demo_server import DEFAULT_PORT, TINY_PNG, DemoTransport, _announcement, main, serve

TOKEN = "demo-t0ken-for-tests"
TRANSPORTS: list[DemoTransport] = ["streamable-http", "sse"]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


@asynccontextmanager
async def running_demo(transport: DemoTransport, token: str | None = TOKEN) -> AsyncIterator[tuple[str, str]]:
    """Run the demo server in this event loop; yield (url, token) once it listens."""
    reported: list[tuple[str, str]] = []
    ready = anyio.Event()

    def on_ready(url: str, token: str) -> None:
        reported.append((url, token))
        ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(serve, port=0, token=token, transport=transport, ready=on_ready))
        with anyio.fail_after(10):
            await ready.wait()
        yield reported[0]
        tg.cancel_scope.cancel()


@asynccontextmanager
async def connected(url: str, transport: DemoTransport, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with AsyncExitStack() as stack:
        if transport == "sse":
            client = Client(sse_client(url, headers=headers))
        else:
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers))
            client = Client(streamable_http_client(url, http_client=http))
        yield await stack.enter_async_context(client)


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_whoami_echoes_the_authorization_header_the_server_received(transport: DemoTransport) -> None:
    async with running_demo(transport) as (url, _), connected(url, transport, TOKEN) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("whoami", {})
    headers = json.loads(text_of(result))
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["host"].startswith("127.0.0.1:")
    assert not result.is_error


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_demo_tools_exist_and_answer(transport: DemoTransport) -> None:
    async with running_demo(transport) as (url, _), connected(url, transport, TOKEN) as client:
        with anyio.fail_after(10):
            listed = await client.list_tools()
            echoed = await client.call_tool("echo", {"text": "hello there"})
            added = await client.call_tool("add", {"a": 2, "b": 3.5})
            image = await client.call_tool("tiny_image", {})
            failed = await client.call_tool("fail", {"message": "as designed"})
    assert {tool.name for tool in listed.tools} == {"whoami", "echo", "add", "tiny_image", "fail"}
    assert text_of(echoed) == "hello there"
    assert text_of(added) == "5.5"
    [block] = image.content
    assert isinstance(block, types.ImageContent)
    assert block.mime_type == "image/png"
    assert block.data.startswith("iVBORw0KGgo")  # base64 of the PNG signature
    assert failed.is_error
    assert "as designed" in text_of(failed)


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x", TOKEN],
    ids=["missing", "wrong-token", "wrong-scheme", "token-prefix", "no-scheme"],
)
async def test_a_request_without_the_right_bearer_token_is_refused_with_401(
    transport: DemoTransport, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    async with running_demo(transport) as (url, _), httpx2.AsyncClient(headers=headers) as http:
        with anyio.fail_after(10):
            if transport == "sse":
                response = await http.get(url, headers={"Accept": "text/event-stream"})
            else:
                response = await http.post(
                    url, json=INITIALIZE, headers={"Accept": "application/json, text/event-stream"}
                )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert TOKEN not in response.text


@pytest.mark.anyio
async def test_the_bearer_scheme_is_matched_case_insensitively() -> None:
    headers = {"Authorization": f"bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    async with running_demo("streamable-http") as (url, _), httpx2.AsyncClient() as http:
        with anyio.fail_after(10):
            response = await http.post(url, json=INITIALIZE, headers=headers)
    assert response.status_code == 200


@pytest.mark.anyio
async def test_serve_without_a_token_generates_one_and_requires_it() -> None:
    async with running_demo("streamable-http", token=None) as (url, token):
        assert len(token) >= 32
        async with connected(url, "streamable-http", token) as client:
            with anyio.fail_after(10):
                result = await client.call_tool("whoami", {})
    assert json.loads(text_of(result))["authorization"] == f"Bearer {token}"


@pytest.mark.anyio
async def test_serve_reports_the_real_port_and_the_transport_path() -> None:
    async with running_demo("sse") as (url, token):
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/sse")
        assert not url.endswith(":0/sse")
        assert token == TOKEN


def test_the_announcement_gives_the_line_to_paste_into_a_chat() -> None:
    text = _announcement("http://127.0.0.1:8765/mcp", "tok", "streamable-http")
    assert "  /mcp_add demo http://127.0.0.1:8765/mcp --bearer" in text.splitlines()
    assert "Bearer token: tok" in text.splitlines()
    sse = _announcement("http://127.0.0.1:8765/sse", "tok", "sse")
    assert "  /mcp_add demo http://127.0.0.1:8765/sse --transport sse --bearer" in sse.splitlines()


def test_main_reports_a_port_in_use_and_exits_with_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--port", str(port), "--token", "x"]) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_the_default_port_is_8765() -> None:
    assert DEFAULT_PORT == 8765
    assert TINY_PNG.startswith(b"\x89PNG\r\n\x1a\n")
