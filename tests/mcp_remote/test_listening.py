"""The Streamable HTTP client's listening GET is answered locally; every other request goes out."""

from __future__ import annotations

import anyio
import pytest

from playa.mcp_remote._listening import NoListeningClient
from servers.python_servers import recording_http_server

pytestmark = pytest.mark.anyio

EVENT_STREAM = {"Accept": "text/event-stream"}


async def test_the_listening_get_never_reaches_the_server_and_ends_when_closed() -> None:
    with anyio.fail_after(5):
        async with recording_http_server() as server, NoListeningClient(endpoint=server.url) as client:
            received: list[bytes] = []
            async with client.stream("GET", server.url, headers=EVENT_STREAM) as response:
                assert response.status_code == 200
                assert response.headers["content-type"] == "text/event-stream"

                async def read() -> None:
                    async for chunk in response.aiter_bytes():
                        received.append(chunk)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(read)
                    await anyio.wait_all_tasks_blocked()
                    # Quiet, as a server with nothing to say: reading waits until the stream is closed.
                    assert received == []
                    await response.aclose()
            assert received == []
            assert server.requests == []


async def test_a_resuming_get_another_url_and_posts_go_to_the_server() -> None:
    with anyio.fail_after(5):
        async with recording_http_server() as server, NoListeningClient(endpoint=server.url) as client:
            resumed = await client.get(server.url, headers={**EVENT_STREAM, "Last-Event-ID": "41"})
            other = await client.get(server.url + "/elsewhere", headers=EVENT_STREAM)
            posted = await client.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert [r.status_code for r in (resumed, other, posted)] == [200, 200, 200]
            assert [(r.method, r.target) for r in server.requests] == [
                ("GET", "/mcp"),
                ("GET", "/mcp/elsewhere"),
                ("POST", "/mcp"),
            ]
            assert server.requests[0].headers["last-event-id"] == "41"
