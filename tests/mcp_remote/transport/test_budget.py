"""The result budget: a huge tool result fails its call clearly, memory stays bounded, the server stays usable.

The server with the 50 MB result runs in a child process, so that ``tracemalloc`` measures the
client alone (an in-process server would hold the 50 MB itself).
"""

from __future__ import annotations

import selectors
import subprocess
import sys
import textwrap
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Literal

import anyio
import httpx2
import pytest
from anyio.abc import TaskGroup
from mcp_types import TextContent

from playa.exceptions import CallFailed, RemoteError
from playa.mcp_remote import ResultBudget, ResultTooLarge
from playa.mcp_remote.transport import Connection, ConnectionSettings, Connector, Endpoint, format_size
from servers.python_servers import LOOPBACK, recording_http_server

pytestmark = pytest.mark.anyio

BIG = 50 * 1000 * 1000
BUDGET = 4 * 1024 * 1024
# Well below the 50 MB the server sends; above what reading up to the budget may take.
MEMORY_BOUND = 3 * BUDGET
START_TIMEOUT = 30.0

Variant = Literal["streamable-http", "json", "sse"]

_SERVER = textwrap.dedent(
    """
    import asyncio, socket, sys
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    SIZE = int(sys.argv[1])

    def make():
        server = MCPServer("big")

        @server.tool()
        def big() -> str:
            \"\"\"A very large text.\"\"\"
            return "x" * SIZE

        @server.tool()
        def small() -> str:
            \"\"\"A small text.\"\"\"
            return "small"

        return server

    async def main():
        apps = {
            "streamable-http": make().streamable_http_app(host="127.0.0.1"),
            "json": make().streamable_http_app(host="127.0.0.1", json_response=True),
            "sse": make().sse_app(host="127.0.0.1"),
        }
        running = []
        for name, app in apps.items():
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(64)
            config = uvicorn.Config(app, lifespan="on", log_config=None, log_level="critical")
            running.append((name, sock, uvicorn.Server(config)))
        print(" ".join(f"{name}={sock.getsockname()[1]}" for name, sock, _ in running), flush=True)
        await asyncio.gather(*(server.serve(sockets=[sock]) for _, sock, server in running))

    asyncio.run(main())
    """
)


@pytest.fixture(scope="module")
def big_server() -> Iterator[dict[str, int]]:
    """Ports of a child process serving a 50 MB ``big`` tool over each transport (``json``: JSON answers)."""
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(BIG)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout=START_TIMEOUT):
                pytest.fail("the big-result server did not start")
        line = process.stdout.readline().decode()
        ports = {name: int(port) for name, _, port in (part.partition("=") for part in line.split())}
        assert set(ports) == {"streamable-http", "json", "sse"}, line
        yield ports
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def target(ports: dict[str, int], variant: Variant) -> Endpoint:
    url = f"http://{LOOPBACK}:{ports[variant]}"
    if variant == "sse":
        return Endpoint(server="big", url=f"{url}/sse", transport="sse")
    return Endpoint(server="big", url=f"{url}/mcp", transport="streamable-http")


def text_of(result: object) -> str:
    return "".join(b.text for b in getattr(result, "content", []) if isinstance(b, TextContent))


# No timeout is under test: a 50 MB answer read with tracemalloc on is slow on a busy machine.
SETTINGS = ConnectionSettings(
    connect_timeout=15.0, call_timeout=90.0, close_timeout=5.0, max_result_bytes=BUDGET
)


async def call_big_measuring_memory(connection: Connection) -> tuple[RemoteError, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        with pytest.raises(RemoteError) as failed:
            await connection.call_tool("big", {})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return failed.value, peak - base


@pytest.mark.parametrize("variant", ["streamable-http", "json"])
async def test_a_huge_streamable_http_result_fails_clearly_in_bounded_memory_and_the_session_lives_on(
    big_server: dict[str, int], task_group: TaskGroup, variant: Variant
) -> None:
    with anyio.fail_after(240):
        connection = await Connector(SETTINGS).connect(target(big_server, variant), task_group)
        try:
            error, peak = await call_big_measuring_memory(connection)
            assert type(error) is RemoteError
            assert (
                error.reason == "the result is larger than 4 MiB, the most this host reads; it was not read"
            )
            assert peak < MEMORY_BOUND, f"reading a cut result took {format_size(peak)}"
            # Only that answer was refused: the same session answers the next call.
            assert not connection.broken
            assert text_of(await connection.call_tool("small", {})) == "small"
        finally:
            await connection.aclose()


async def test_a_huge_sse_result_fails_clearly_in_bounded_memory_and_the_next_call_reconnects(
    big_server: dict[str, int], task_group: TaskGroup
) -> None:
    connector = Connector(SETTINGS)
    with anyio.fail_after(240):
        connection = await connector.connect(target(big_server, "sse"), task_group)
        try:
            error, peak = await call_big_measuring_memory(connection)
            # The SSE transport reads results off one shared event stream: the SDK refuses the
            # event at its fixed 1 MiB, and that ends the stream.
            assert isinstance(error, CallFailed)
            assert (
                error.reason == "the result is larger than 1 MiB, the most this host reads; it was not read"
            )
            assert peak < MEMORY_BOUND, f"reading a cut result took {format_size(peak)}"
            assert connection.broken
        finally:
            await connection.aclose()
        again = await connector.connect(target(big_server, "sse"), task_group)
        try:
            assert text_of(await again.call_tool("small", {})) == "small"
        finally:
            await again.aclose()


def gzip_of_zeros(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1024 * 1024)
    parts = [packer.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, packer.flush()])


async def test_a_compressed_answer_is_counted_decoded_so_a_gzip_bomb_stays_bounded() -> None:
    bomb = gzip_of_zeros(BIG)
    assert len(bomb) < 100_000
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    budget = ResultBudget(BUDGET)
    async with (
        recording_http_server(200, headers=headers, body=bomb) as server,
        httpx2.AsyncClient(event_hooks={"response": [budget.on_response]}) as client,
    ):
        tracemalloc.start()
        try:
            with anyio.fail_after(10), pytest.raises(ResultTooLarge, match="larger than 4 MiB"):
                await client.post(server.url, json={})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert budget.exceeded == 1
    assert peak < MEMORY_BOUND, f"decoding the bomb took {format_size(peak)}"


async def test_a_compressed_answer_within_the_budget_is_decoded_whole() -> None:
    body = b'{"ok": true}' * 1000
    packed = zlib.compress(body)  # "deflate" as specified: zlib-wrapped
    headers = {"Content-Type": "application/json", "Content-Encoding": "deflate"}
    budget = ResultBudget(BUDGET)
    async with (
        recording_http_server(200, headers=headers, body=packed) as server,
        httpx2.AsyncClient(event_hooks={"response": [budget.on_response]}) as client,
    ):
        with anyio.fail_after(10):
            response = await client.post(server.url, json={})
    assert response.content == body
    assert budget.exceeded == 0


async def test_an_encoding_that_was_not_offered_is_refused_instead_of_decoded_unbounded() -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": "br"}
    async with recording_http_server(200, headers=headers, body=b"\x8b\x02\x80{}\x03") as server:
        budget = ResultBudget(BUDGET)
        async with httpx2.AsyncClient(event_hooks={"response": [budget.on_response]}) as client:
            with anyio.fail_after(10), pytest.raises(httpx2.StreamError, match="did not offer"):
                await client.post(server.url, json={})


def test_the_budget_is_a_setting_with_a_sane_floor_and_sizes_read_well() -> None:
    assert ConnectionSettings().max_result_bytes == 4 * 1024 * 1024
    with pytest.raises(ValueError, match="max_result_bytes"):
        ConnectionSettings(max_result_bytes=10)
    assert [format_size(n) for n in (100, 1536, 4 * 1024 * 1024, 3 << 30)] == [
        "100 bytes",
        "1.5 KiB",
        "4 MiB",
        "3 GiB",
    ]


async def test_closing_an_answer_whose_rest_breaks_off_raises_nothing() -> None:
    # The SDK closes an event stream once its answer came; the rest is then read to keep the
    # connection. When the server breaks off instead, the close must still succeed quietly:
    # an error there would make the SDK treat the answered request as lost.
    event = b"event: message\ndata: {}\n\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

    async def answer_then_break_off(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await stream.receive()
            await stream.send(head + b"%x\r\n" % len(event) + event + b"\r\n")
            # No final chunk: the connection closes in the middle of the body.

    listener = await anyio.create_tcp_listener(local_host=LOOPBACK, local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    budget = ResultBudget(BUDGET)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer_then_break_off)
        async with httpx2.AsyncClient(event_hooks={"response": [budget.on_response]}) as client:
            with anyio.fail_after(10):
                async with client.stream("POST", f"http://{LOOPBACK}:{port}/mcp", json={}) as response:
                    first = await anext(response.aiter_bytes())
                    assert first == event
                    await response.aclose()
                assert response.is_closed
        tg.cancel_scope.cancel()
