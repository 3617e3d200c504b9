"""Target 2: connect + tool listing against the bare SDK, and memory per open connection.

Connect time, alternating: Playa's ``Connector.connect`` (transport ``auto``, which goes straight
to the transport and protocol that worked last: here the 2026 protocol, no handshake) against
the SDK's ``Client`` over ``streamable_http_client`` with an httpx2 client on the same shared SSL
context, pinned to the same protocol version, then ``list_tools``: the same requests on the
wire. The SDK's own negotiation (``mode="auto"``) and its ``initialize`` handshake
(``mode="legacy"``) are timed beside it, for the record. Each side's timing includes building
its httpx2 client; closing is not timed.

Memory: each side holds its connections in a fresh process (``bench._memory``) against a fresh
server process, and reports the growth of its resident set.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_MODERN_VERSION

from bench._common import ROOT, Report, Spread, bench_server, verdict
from bench._playa import TOKEN
from playa.mcp_remote import ConnectionSettings, Connector, Endpoint

TARGET_RATIO = 1.2
TARGET_BYTES = 150_000
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


async def _hold(side: str, count: int) -> dict[str, object]:
    async with bench_server() as served:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
        args = [
            sys.executable,
            "-m",
            "bench._memory",
            "--side",
            side,
            "--count",
            str(count),
            "--url",
            served.url,
        ]
        with anyio.fail_after(600):
            done = await anyio.run_process(args, cwd=ROOT, env=env, check=False, stderr=subprocess.PIPE)
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
            return {"side": side, "count": count, "opened": 0, "failures": {"crashed": count}, "error": tail}
        result: dict[str, object] = json.loads(done.stdout.decode().strip().splitlines()[-1])
        return result


async def run(quick: bool) -> Report:
    connects = 10 if quick else 100
    held = 50 if quick else 2000
    held_default = 10 if quick else 500
    report = Report(
        "connect",
        f"2. Connect + tool listing on {LATEST_MODERN_VERSION} (no initialize handshake), and memory per open connection",
    )
    ours: list[float] = []
    sdk: list[float] = []
    auto: list[float] = []
    legacy: list[float] = []
    cpu = {"ours": 0.0, "sdk": 0.0}
    connector = Connector(ConnectionSettings())
    ssl_context = await connector.ssl_context()
    async with bench_server() as served, anyio.create_task_group() as tg:
        endpoint = Endpoint(server="bench", url=served.url, headers=HEADERS)

        async def playa_connect() -> float:
            started = anyio.current_time()
            connection = await connector.connect(endpoint, tg)
            took = anyio.current_time() - started
            assert connection.tools
            await connection.aclose()
            return took

        async def sdk_connect(mode: str = LATEST_MODERN_VERSION) -> float:
            async with contextlib.AsyncExitStack() as stack:
                started = anyio.current_time()
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        verify=ssl_context, timeout=httpx2.Timeout(30.0, read=300.0), headers=HEADERS
                    )
                )
                client = await stack.enter_async_context(
                    Client(streamable_http_client(served.url, http_client=http), mode=mode)
                )
                assert (await client.list_tools()).tools
                return anyio.current_time() - started

        for _ in range(3):  # warm up both sides
            await playa_connect()
            await sdk_connect()
        assert connector.remembered_protocol(served.url) == LATEST_MODERN_VERSION

        async def timed(key: str, connect: Callable[[], Awaitable[float]], into: list[float]) -> None:
            before = time.process_time()
            into.append(await connect())
            cpu[key] += time.process_time() - before

        for round_ in range(connects):
            if round_ % 2:
                await timed("sdk", sdk_connect, sdk)
                await timed("ours", playa_connect, ours)
            else:
                await timed("ours", playa_connect, ours)
                await timed("sdk", sdk_connect, sdk)
            if round_ % 4 == 0:
                auto.append(await sdk_connect("auto"))
            elif round_ % 4 == 2:
                legacy.append(await sdk_connect("legacy"))
    a, b = Spread.of(ours), Spread.of(sdk)
    ratio = a.median / b.median
    report.add(
        "connect + tools/list, median (p25–p75)",
        a.text(),
        b.text(),
        f"{ratio:.3f}",
        f"≤ {TARGET_RATIO:.1f}",
        verdict(ratio <= TARGET_RATIO),
    )
    report.add(
        "client CPU per connect (closing included)",
        f"{cpu['ours'] / connects * 1e3:.1f} ms",
        f"{cpu['sdk'] / connects * 1e3:.1f} ms",
        f"{cpu['ours'] / cpu['sdk']:.2f}",
    )
    for label, times in (
        ("SDK Client mode=auto (probes server/discover first)", auto),
        ('SDK Client mode="legacy" (the initialize handshake)', legacy),
    ):
        report.add(label, Spread.of(times).text(), b.text(), f"{Spread.of(times).median / b.median:.2f}")

    playa = await _hold("playa", held)
    shared = await _hold("sdk-shared", held)
    default = await _hold("sdk-default", held_default)

    def per(result: dict[str, object]) -> float | None:
        opened = int(str(result.get("opened", 0)))
        return int(str(result["rss_delta"])) / opened if opened else None

    def describe(result: dict[str, object]) -> str:
        each = per(result)
        text = f"{each / 1e3:.0f} kB" if each is not None else "n/a"
        text += f" × {result['opened']}/{result['count']} open"
        if result.get("failures"):
            text += f", failed: {result['failures']}"
        if "seconds" in result:
            text += f", {float(str(result['seconds'])):.1f} s to open"
        return text

    ours_each, theirs_each = per(playa), per(shared)
    reached = int(str(playa.get("opened", 0)))
    report.add(
        f"RSS per open connection at {held:,}",
        describe(playa),
        describe(shared),
        f"{ours_each / theirs_each:.2f}" if ours_each and theirs_each else "",
        f"≤ {TARGET_BYTES // 1000} kB at 2,000",
        verdict(ours_each is not None and ours_each <= TARGET_BYTES and reached >= min(held, 2000)),
    )
    report.add("SDK default Client(url), RSS per open connection", describe(default))
    if "error" in playa:
        report.notes.append(f"Playa's memory run failed: {playa['error']}")
    report.notes.append(
        f"Baseline for connect: the SDK with one shared SSL context, pinned to {LATEST_MODERN_VERSION} "
        "(what Playa speaks to this server once it negotiated). Memory: resident-set growth of a fresh process holding the connections (at most 50 connecting at "
        "once), against a fresh server process; baseline column = the SDK with a shared SSL context."
    )
    report.chart = {
        # What each bar holds: connect, then tools/list; only the legacy bar has a handshake.
        "connect": {
            f"Playa (remembered {LATEST_MODERN_VERSION})": a,
            f"SDK pinned to {LATEST_MODERN_VERSION}, shared SSL": b,
            "SDK mode=auto (+ server/discover)": Spread.of(auto),
            "SDK mode=legacy (+ initialize)": Spread.of(legacy),
        },
        "memory_kb": {
            "Playa": (ours_each or 0) / 1e3,
            "SDK, shared SSL context": (theirs_each or 0) / 1e3,
            "SDK default Client(url)": (per(default) or 0) / 1e3,
        },
    }
    return report
