"""Holds many MCP connections open in a fresh process and reports what they cost in memory.

``python -m bench._memory --side playa|sdk-same|sdk-shared|sdk-default --count N --url URL`` opens N
connections to one server (at most ``--concurrency`` connecting at once), then prints one JSON
line: how many opened and failed, the resident-set growth, and the seconds and CPU seconds it
took. A process of its own, so that memory freed by an earlier measurement never hides the cost
of a later one.

- ``playa``: ``Connector.connect`` (one shared SSL context, tools listed).
- ``sdk-same``: ``mcp.Client`` over ``streamable_http_client`` with an httpx2 client built on
  one shared SSL context, sending what Playa sends at a connect: ``server/discover``
  (``mode="auto"``) and ``tools/list``. Neither side holds a ``subscriptions/listen`` stream:
  Playa opens one when a connection is first called, and these are never called.
- ``sdk-shared``: the same client pinned to the 2026 protocol, tools listed, nothing held: the
  bare SDK used with care, learning neither the server's instructions nor its changes.
- ``sdk-default``: ``mcp.Client(url)``, every default (its own SSL context, ``mode="auto"``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import ssl
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import Client
from mcp_types.version import LATEST_MODERN_VERSION

from bench._common import ROOT, child_env, raise_fd_limit, rss_bytes, sdk_client
from playa._runtime import tune_runtime
from playa.mcp_remote import ConnectionSettings, Connector, Endpoint

HEADERS = {"Authorization": "Bearer bench-token-0123456789abcdef0123456789"}


async def hold_elsewhere(side: str, count: int, url: str, concurrency: int = 50) -> dict[str, object]:
    """Run this module in a fresh process against ``url``; its result, or what crashed."""
    env = child_env()
    args = [sys.executable, "-m", "bench._memory", "--side", side, "--count", str(count), "--url", url]
    args += ["--concurrency", str(concurrency)]
    with anyio.fail_after(600):
        done = await anyio.run_process(args, cwd=ROOT, env=env, check=False, stderr=subprocess.PIPE)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        return {"side": side, "count": count, "opened": 0, "failures": {"crashed": count}, "error": tail}
    result: dict[str, object] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def side_client(
    side: str, url: str, ssl_context: ssl.SSLContext
) -> contextlib.AbstractAsyncContextManager[Client]:
    """The bare SDK's client of ``side`` (``sdk-default``, ``sdk-same``, ``sdk-shared``) to ``url``."""
    if side == "sdk-default":
        return Client(url)
    mode = "auto" if side == "sdk-same" else LATEST_MODERN_VERSION
    return sdk_client(url, headers=HEADERS, mode=mode, verify=ssl_context)


async def hold(args: argparse.Namespace) -> dict[str, Any]:
    raise_fd_limit()
    stop = anyio.Event()
    all_tried = anyio.Event()
    opened = 0
    failures: dict[str, int] = {}
    limiter = anyio.CapacityLimiter(args.concurrency)
    connector = Connector(ConnectionSettings(connect_timeout=30.0))
    ssl_context = await connector.ssl_context()

    async def playa(tg: Any) -> Callable[[], Awaitable[None]]:
        connection = await connector.connect(
            Endpoint(server="bench", url=args.url, transport="streamable-http", headers=HEADERS), tg
        )
        assert connection.tools
        return connection.aclose

    def tried() -> None:
        if opened + sum(failures.values()) >= args.count:
            all_tried.set()

    async def one(tg: Any) -> None:
        nonlocal opened
        try:
            if args.side == "playa":
                async with limiter:
                    close = await playa(tg)
                opened += 1
                tried()
                await stop.wait()
                await close()
                return
            async with contextlib.AsyncExitStack() as stack:
                async with limiter:
                    client = await stack.enter_async_context(side_client(args.side, args.url, ssl_context))
                    assert (await client.list_tools()).tools
                opened += 1
                tried()
                await stop.wait()
        except Exception as exc:  # boundary: a failed connect is counted, not fatal
            key = type(exc).__name__
            failures[key] = failures.get(key, 0) + 1
            tried()

    # Warm up: every import and lazy cache is paid before the baseline is read.
    async with anyio.create_task_group() as tg:
        warm = anyio.Event()

        async def warm_one() -> None:
            if args.side == "playa":
                close = await playa(tg)
                await close()
            else:
                async with side_client(args.side, args.url, ssl_context) as client:
                    await client.list_tools()
            warm.set()

        tg.start_soon(warm_one)
        await warm.wait()
    gc.collect()
    before = rss_bytes()
    started, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(args.count):
            tg.start_soon(one, tg)
        await all_tried.wait()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        gc.collect()
        after = rss_bytes()
        stop.set()
    return {
        "side": args.side,
        "count": args.count,
        "opened": opened,
        "failures": failures,
        "rss_delta": after - before,
        "seconds": seconds,
        "cpu": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=("playa", "sdk-same", "sdk-shared", "sdk-default"), required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    tune_runtime()  # as the `playa` command runs
    print(json.dumps(anyio.run(hold, args)), flush=True)


if __name__ == "__main__":
    main()
