"""A server written by others: `@modelcontextprotocol/server-everything` from npm, both transports."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import anyio
import pytest

from playa.agent import Host
from playa.mcp_remote import (
    ConnectionSettings,
    HostSecret,
    RemoteMcpSettings,
)
from servers.node import server_everything
from support.chat import ScriptedUI, msg
from support.host import remote_host

pytestmark = [pytest.mark.anyio, pytest.mark.npm]

SETTINGS = RemoteMcpSettings(connection=ConnectionSettings(connect_timeout=10.0, call_timeout=10.0))


async def ask(host: Host, text: str) -> str:
    session = await host.session("console:everything", owner="owner")
    with anyio.fail_after(20):
        reply = await host.handle(session, msg(text), ScriptedUI())
    assert reply is not None
    return reply.text


@pytest.mark.parametrize(
    ("transport", "flag"),
    [("streamable-http", ""), ("sse", ""), ("sse", " --transport sse")],
    ids=["streamable-http", "sse-by-fallback", "sse-forced"],
)
async def test_server_everything_is_connected_and_its_tools_answer(
    tmp_path: Path, host_secret: HostSecret, transport: Literal["streamable-http", "sse"], flag: str
) -> None:
    async with (
        server_everything(transport) as url,
        remote_host(tmp_path, host_secret, settings=SETTINGS) as host,
    ):
        added = await ask(host, f"/mcp_add everything {url}{flag}")
        assert added.startswith(f"Added everything: connected over {transport}, ")
        assert "everything__echo" in added and "everything__get-sum" in added

        echoed = await ask(host, 'everything__echo {"message": "hello from playa"}')
        assert echoed == "[offline model] everything__echo returned:\nEcho: hello from playa"

        summed = await ask(host, 'everything__get-sum {"a": 2, "b": 40}')
        assert "42" in summed

        image = await ask(host, "everything__get-tiny-image")
        assert "[image attached: image/png" in image

        structured = await ask(host, 'everything__get-structured-content {"location": "New York"}')
        assert "returned:" in structured and "temperature" in structured.lower()

        wrong = await ask(host, 'everything__get-sum {"a": "two"}')
        assert wrong.startswith("[offline model] everything__get-sum failed:")
