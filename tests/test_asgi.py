"""Serving ASGI apps on a socket bound beforehand (the demo server, the Telegram webhook)."""

from __future__ import annotations

import time

import anyio
import httpx2
import pytest
from starlette.types import Receive, Scope, Send

from playa._asgi import bind, serving

pytestmark = pytest.mark.anyio

REQUESTS = 11
# With Nagle's algorithm on, every request on a reused connection waits for a delayed ACK (40 ms
# on Linux), so even the fastest of them takes that long. Without it, a loopback request takes a
# millisecond or two: the fastest of eleven stays far below the bound on a busy machine too.
BOUND = 0.03


async def two_part_answer(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers every request with its headers and its body in two writes, as uvicorn sends them."""
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def test_requests_on_a_reused_connection_never_wait_for_a_delayed_ack() -> None:
    with bind("127.0.0.1", 0) as sock, anyio.fail_after(10):
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
        async with serving(two_part_answer, sock, lifespan="off"), httpx2.AsyncClient() as client:
            assert (await client.get(url)).text == "ok"  # the connection, now open and idle
            took = []
            for _ in range(REQUESTS):
                started = time.perf_counter()
                assert (await client.get(url)).text == "ok"
                took.append(time.perf_counter() - started)
    assert min(took) < BOUND, f"every request on a reused connection took {min(took) * 1e3:.0f} ms or more"
