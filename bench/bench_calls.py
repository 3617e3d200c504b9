"""Target 1: a tool call through Playa's whole path against the bare SDK's ``Client.call_tool``.

Playa's path: ``Host.call_tool`` → registry → ``RemoteMcpTool`` → ``ChatServers`` → ``Connection``
→ the SDK, then result mapping and the chat's redactor (the server was added with a bearer
token, so the redactor is live). The baseline: ``mcp.Client(url)``, every SDK default (it
negotiates the 2026 protocol with this server, as Playa does). Both talk to one server process,
in alternating blocks of 20 calls. The SDK over the ``initialize`` handshake is timed after, for
the record.

Playa's own cost is the client CPU a call takes on top of the SDK's, as the median over the
rounds of one block per side of the difference between their CPU per call. Adjacent blocks
take ~0.1 s, so they mostly see the machine in the same state; totals over the whole run would
not (this VM switches between a fast and a slow state, see docs/benchmarks.md).
"""

from __future__ import annotations

import statistics

import anyio
from mcp import Client

from bench._common import Report, Spread, bench_server, timed_calls, verdict
from bench._playa import TOKEN, QuietUI, message, playa_in_tmp
from playa.mcp_remote import RemoteMcpSettings

TARGET_RATIO = 1.10
PER_BLOCK = 20
ARGS = {"text": "hello from the benchmark"}


async def run(quick: bool) -> Report:
    calls = 200 if quick else 1000
    blocks = calls // PER_BLOCK
    report = Report("calls", "1. Tool-call overhead (1,000 sequential echo calls, Streamable HTTP)")
    ours: list[float] = []
    sdk: list[float] = []
    conn: list[float] = []
    # Per side, the client CPU seconds per call in each block.
    cpu: dict[str, list[float]] = {"ours": [], "sdk": [], "conn": []}
    async with bench_server() as served, playa_in_tmp(RemoteMcpSettings()) as (host, extension):
        ui = QuietUI()
        session = await host.session("console:bench", owner="owner")
        reply = await host.handle(session, message(f"/mcp_add bench {served.url} --bearer {TOKEN}"), ui)
        assert reply is not None and "bench__echo" in reply.text, reply
        state = extension.chat(session).servers["bench"]
        assert state.connection is not None
        connection = state.connection
        result = await host.call_tool(session, "bench__echo", ARGS)
        assert result.text == ARGS["text"] and not result.is_error, result

        async def playa_call() -> object:
            return await host.call_tool(session, "bench__echo", ARGS)

        async def connection_call() -> object:
            return await connection.call_tool("echo", ARGS)

        async with Client(served.url) as client:
            # A fair pair: both sides speak the same protocol version to the server.
            assert connection.protocol == client.protocol_version, (
                connection.protocol,
                client.protocol_version,
            )

            async def sdk_call() -> object:
                return await client.call_tool("echo", ARGS)

            for call in (playa_call, sdk_call, connection_call):  # warm up both sides
                for _ in range(20):
                    await call()
            for block in range(blocks):
                sides = [("ours", playa_call, ours), ("sdk", sdk_call, sdk), ("conn", connection_call, conn)]
                if block % 2:
                    sides.reverse()
                for key, call, into in sides:
                    cpu[key].append(await timed_calls(call, PER_BLOCK, into) / PER_BLOCK)

            # For the record: the SDK over the initialize handshake, which answers with event streams.
            legacy: list[float] = []
            async with Client(served.url, mode="legacy") as legacy_client:
                await legacy_client.call_tool("echo", ARGS)
                await timed_calls(lambda: legacy_client.call_tool("echo", ARGS), 20 if quick else 50, legacy)

    a, b, c = Spread.of(ours), Spread.of(sdk), Spread.of(conn)
    ratio = a.median / b.median
    report.add(
        "call, median (p25–p75)",
        a.text(),
        b.text(),
        f"{ratio:.3f}",
        f"≤ {TARGET_RATIO:.2f}",
        verdict(ratio <= TARGET_RATIO),
    )

    def extra(side: str, base: str) -> float:
        """The median over rounds of the CPU per call ``side`` took beyond ``base``."""
        return statistics.median(x - y for x, y in zip(cpu[side], cpu[base], strict=True))

    n = len(ours)
    cpu_ours, cpu_sdk = statistics.median(cpu["ours"]), statistics.median(cpu["sdk"])
    report.add(
        "client CPU per call, median of blocks",
        f"{cpu_ours * 1e6:.0f} µs",
        f"{cpu_sdk * 1e6:.0f} µs",
        f"{cpu_ours / cpu_sdk:.3f}",
    )
    # The client's CPU is the bottleneck of a call, and CPU time is far less noisy than the
    # difference of two wall-time medians on a shared 2-core machine: it decides.
    overhead = extra("ours", "sdk")
    report.add(
        "Playa's own cost per call: client CPU (wall: median difference)",
        f"{overhead * 1e6:+.0f} µs CPU ({(a.median - b.median) * 1e6:+.0f} µs wall)",
        target="< 300 µs CPU",
        verdict=verdict(overhead < 300e-6),
    )
    report.add(
        "Connection.call_tool alone (layer below the host)",
        c.text(),
        b.text(),
        f"{c.median / b.median:.3f}",
    )
    report.add(
        "client CPU per call: host layers / connection layer",
        f"{extra('ours', 'conn') * 1e6:+.0f} µs / {extra('conn', 'sdk') * 1e6:+.0f} µs",
    )
    report.add(
        'SDK Client(url, mode="legacy") (the initialize handshake)',
        Spread.of(legacy).text(),
        b.text(),
        f"{Spread.of(legacy).median / b.median:.2f}",
    )
    report.notes.append(
        "Baseline: `mcp.Client(url)`, every SDK default: it negotiates the 2026 protocol with this "
        'server, as Playa does. The `mode="legacy"` row is the SDK over the initialize handshake, '
        "for the record, not the baseline."
    )
    report.chart = {"Playa host.call_tool": a, "Playa Connection.call_tool": c, "SDK Client.call_tool": b}
    report.notes.append(
        f"{n} calls per side in {blocks} alternating blocks of {PER_BLOCK}, after 20 warm-up calls each; "
        "CPU differences: median over the rounds of one block per side"
    )
    return report


if __name__ == "__main__":
    from bench.__main__ import print_report

    print_report(anyio.run(run, True))
