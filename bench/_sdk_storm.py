"""The bare SDK's side of the connect storm, in a process of its own, one round at a time.

``python -m bench._sdk_storm --url URL --concurrency N`` warms up (one connection made and closed),
prints ``READY``, then for every line ``COUNT`` on stdin opens COUNT more connections at once (at
most N connecting at a time), each sending what Playa sends at a connect (``server/discover`` and
``tools/list``, ``bench._memory``'s ``sdk-same``), and prints one JSON line: the round's seconds
and CPU seconds, how many opened, and what failed. Every connection stays open until stdin
closes, so each round is made beside the rounds before it, as Playa's chats are. The scale
benchmark alternates these rounds with rounds of its own storm, so that the machine's changes of
speed hit both sides alike.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
import time
from typing import Any

import anyio

from bench._common import raise_fd_limit
from bench._memory import side_client
from playa._runtime import tune_runtime
from playa.mcp_remote import ConnectionSettings, Connector


async def serve(url: str, concurrency: int) -> None:
    raise_fd_limit()
    ssl_context = await Connector(ConnectionSettings()).ssl_context()
    limiter = anyio.CapacityLimiter(concurrency)
    stop = anyio.Event()

    async def one(tried: list[str | None], all_tried: anyio.Event, count: int) -> None:
        """One connection of a round: ``tried`` hears None once it is open, or what failed."""

        def done(outcome: str | None) -> None:
            tried.append(outcome)
            if len(tried) == count:
                all_tried.set()

        opened = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with limiter:
                    client = await stack.enter_async_context(side_client("sdk-same", url, ssl_context))
                    assert (await client.list_tools()).tools
                opened = True
                done(None)
                await stop.wait()
        except Exception as exc:  # boundary: a failed connect is counted, not fatal
            if not opened:
                done(type(exc).__name__)

    async with side_client("sdk-same", url, ssl_context) as client:  # every import and lazy cache paid
        await client.list_tools()
    print("READY", flush=True)
    async with anyio.create_task_group() as tg:
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            count = int(line)
            tried: list[str | None] = []
            all_tried = anyio.Event()
            started, cpu = time.perf_counter(), time.process_time()
            for _ in range(count):
                tg.start_soon(one, tried, all_tried, count)
            await all_tried.wait()
            # The round's objects get their middle-generation pass before the clock stops, as Playa's do.
            collected = time.perf_counter()
            gc.collect(1)
            collected = time.perf_counter() - collected
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            failures: dict[str, int] = {}
            for outcome in tried:
                if outcome is not None:
                    failures[outcome] = failures.get(outcome, 0) + 1
            result: dict[str, Any] = {
                "seconds": seconds,
                "cpu": cpu,
                "opened": tried.count(None),
                "failures": failures,
                "collected": collected,
            }
            print(json.dumps(result), flush=True)
        stop.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    args = parser.parse_args()
    tune_runtime()  # as the `playa` command runs
    anyio.run(serve, args.url, args.concurrency)


if __name__ == "__main__":
    main()
