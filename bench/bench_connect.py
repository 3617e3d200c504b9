"""Target 2: connect + tool listing against the bare SDK, and memory per open connection.

Connect time, alternating: Playa's ``Connector.connect`` (transport ``auto``, which goes straight
to the transport and protocol that worked last: here the 2026 protocol, no handshake) against
the SDK's ``Client`` over ``streamable_http_client`` with an httpx2 client on the same shared SSL
context, sending the same requests on the wire, then ``list_tools``. Twice: against a server
whose ``server/discover`` answer has ``ttlMs`` 0 (the SDK server's default: revalidate), where
Playa discovers on every connect and the baseline is the SDK's ``mode="auto"`` (discover, then
list); and against one whose answer stays fresh for 60 s, where Playa reuses it and the baseline
is the SDK pinned to the version (list only). The SDK pinned against the first server (it never
learns the server's instructions or capabilities) and its ``initialize`` handshake
(``mode="legacy"``) are timed beside them, for the record. Each side's timing includes building
its httpx2 client; closing is not timed.

Memory: each side holds its connections in a fresh process (``bench._memory``) against a fresh
server process, and reports the growth of its resident set; the baseline sends what Playa sends
(``server/discover`` and ``tools/list``). Neither holds a ``subscriptions/listen`` stream: Playa
opens a connection's change stream when the connection is first called, and these never are.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from mcp_types.version import LATEST_MODERN_VERSION

from bench._common import Report, Spread, bench_server, sdk_client, verdict
from bench._memory import hold_elsewhere
from bench._playa import TOKEN
from playa.mcp_remote import ConnectionSettings, Connector, Endpoint

TARGET_RATIO = 1.2
TARGET_BYTES = 90_000
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


async def _hold(side: str, count: int) -> dict[str, object]:
    async with bench_server() as served:
        return await hold_elsewhere(side, count, served.url)


@dataclass
class _Timed:
    """Connect times (seconds) of Playa and of the SDK sending the same requests, and their CPU."""

    ours: list[float] = field(default_factory=list)
    sdk: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=lambda: {"ours": 0.0, "sdk": 0.0})
    extra: dict[str, list[float]] = field(default_factory=dict)


async def _connect_times(connects: int, discover_ttl_ms: int, sdk_mode: str, extra: dict[str, str]) -> _Timed:
    """Alternate Playa's connect with the SDK's in ``sdk_mode`` against a server whose discover
    answer is fresh for ``discover_ttl_ms``; time the SDK's ``extra`` modes beside them."""
    timed = _Timed(extra={label: [] for label in extra})
    connector = Connector(ConnectionSettings())
    ssl_context = await connector.ssl_context()
    async with bench_server(discover_ttl_ms=discover_ttl_ms) as served, anyio.create_task_group() as tg:
        endpoint = Endpoint(server="bench", url=served.url, headers=HEADERS)

        async def playa_connect() -> float:
            started = anyio.current_time()
            connection = await connector.connect(endpoint, tg)
            took = anyio.current_time() - started
            assert connection.tools
            await connection.aclose()
            return took

        async def sdk_connect(mode: str = sdk_mode) -> float:
            started = anyio.current_time()
            async with sdk_client(served.url, headers=HEADERS, mode=mode, verify=ssl_context) as client:
                assert (await client.list_tools()).tools
                return anyio.current_time() - started

        for _ in range(3):  # warm up both sides
            await playa_connect()
            await sdk_connect()
        assert connector.remembered_protocol(served.url) == LATEST_MODERN_VERSION

        async def timed_run(key: str, connect: Callable[[], Awaitable[float]], into: list[float]) -> None:
            before = time.process_time()
            into.append(await connect())
            timed.cpu[key] += time.process_time() - before

        modes = list(extra.items())
        for round_ in range(connects):
            if round_ % 2:
                await timed_run("sdk", sdk_connect, timed.sdk)
                await timed_run("ours", playa_connect, timed.ours)
            else:
                await timed_run("ours", playa_connect, timed.ours)
                await timed_run("sdk", sdk_connect, timed.sdk)
            if modes and round_ % 2 == 0:
                label, mode = modes[round_ // 2 % len(modes)]
                timed.extra[label].append(await sdk_connect(mode))
        tg.cancel_scope.cancel()
    return timed


def _add_connects(report: Report, label: str, timed: _Timed, connects: int) -> Spread:
    a, b = Spread.of(timed.ours), Spread.of(timed.sdk)
    ratio = a.median / b.median
    report.add(
        f"{label}, median (p25–p75)",
        a.text(),
        b.text(),
        f"{ratio:.3f}",
        f"≤ {TARGET_RATIO:.1f}",
        verdict(ratio <= TARGET_RATIO),
    )
    report.add(
        "  client CPU per connect (closing included)",
        f"{timed.cpu['ours'] / connects * 1e3:.1f} ms",
        f"{timed.cpu['sdk'] / connects * 1e3:.1f} ms",
        f"{timed.cpu['ours'] / timed.cpu['sdk']:.2f}",
    )
    for extra, times in timed.extra.items():
        report.add(
            f"  {extra}", Spread.of(times).text(), b.text(), f"{Spread.of(times).median / b.median:.2f}"
        )
    return a


async def run(quick: bool) -> Report:
    connects = 10 if quick else 100
    held = 50 if quick else 2000
    held_default = 10 if quick else 500
    report = Report(
        "connect",
        f"2. Connect + tool listing on {LATEST_MODERN_VERSION}, and memory per open connection",
    )
    # A server whose discover answer must be revalidated (ttlMs 0, the SDK server's default):
    # Playa discovers on every connect, as the SDK's mode="auto" does.
    revalidate = await _connect_times(
        connects,
        0,
        "auto",
        {
            f"SDK pinned to {LATEST_MODERN_VERSION} (tools/list only, no discover)": LATEST_MODERN_VERSION,
            'SDK mode="legacy" (the initialize handshake)': "legacy",
        },
    )
    # A server whose discover answer stays fresh for a minute: Playa reuses it and lists only, as
    # the SDK pinned to the version does.
    fresh = await _connect_times(connects, 60_000, LATEST_MODERN_VERSION, {})
    a = _add_connects(report, "connect: server/discover + tools/list (ttlMs 0)", revalidate, connects)
    b = _add_connects(report, "connect: tools/list, discover answer fresh (ttlMs 60 s)", fresh, connects)

    playa = await _hold("playa", held)
    same = await _hold("sdk-same", held)
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

    ours_each, theirs_each = per(playa), per(same)
    reached = int(str(playa.get("opened", 0)))
    report.add(
        f"RSS per open connection at {held:,}",
        describe(playa),
        describe(same),
        f"{ours_each / theirs_each:.2f}" if ours_each and theirs_each else "",
        f"≤ {TARGET_BYTES // 1000} kB at 2,000",
        verdict(ours_each is not None and ours_each <= TARGET_BYTES and reached >= min(held, 2000)),
    )
    report.add("  SDK pinned, tools/list only, no change stream held", describe(shared))
    report.add("  SDK default Client(url), RSS per open connection", describe(default))
    if "error" in playa:
        report.notes.append(f"Playa's memory run failed: {playa['error']}")
    report.notes.append(
        'Baseline for connect: the SDK sending the same requests, with one shared SSL context: mode="auto" '
        f"(server/discover, then tools/list) where the server's discover answer has ttlMs 0, and pinned to "
        f"{LATEST_MODERN_VERSION} (tools/list only) where it is fresh for 60 s and Playa reuses it. "
        "Memory: resident-set growth of a fresh process holding the connections (at most 50 connecting at "
        "once), against a fresh server process; baseline column = the SDK with a shared SSL context sending "
        "what Playa sends (discover, tools/list; no change stream: Playa opens one at a connection's "
        "first call)."
    )
    report.chart = {
        # What each bar holds: one connect and its tools/list; the labels say which requests.
        "connect": {
            "Playa, discover + list (ttlMs 0)": a,
            "SDK mode=auto, discover + list": Spread.of(revalidate.sdk),
            "Playa, list (discover fresh)": b,
            f"SDK pinned to {LATEST_MODERN_VERSION}, list": Spread.of(fresh.sdk),
            "SDK mode=legacy (+ initialize)": Spread.of(
                revalidate.extra['SDK mode="legacy" (the initialize handshake)']
            ),
        },
        "memory_kb": {
            "Playa": (ours_each or 0) / 1e3,
            "SDK, the same requests": (theirs_each or 0) / 1e3,
            "SDK pinned, list only": (per(shared) or 0) / 1e3,
            "SDK default Client(url)": (per(default) or 0) / 1e3,
        },
    }
    return report
