"""Target 1: a tool call through Playa's whole path against the bare SDK's ``Client.call_tool``.

Playa's path: ``Host.call_tool`` → registry → ``RemoteMcpTool`` → ``ChatServers`` → the owner's
policy and the flow guard → ``Connection`` → the SDK (with its result byte budget), then result
mapping and the ToolResultEvent hooks. The baseline: the SDK's ``Client`` with its own defaults
(it negotiates the 2026 protocol with this server, as Playa does), over an httpx2 client that
sends the same bearer token as Playa's (``bench._common.sdk_client``), so both send the server the
same requests. All talk to one server process, in alternating blocks of 20 calls. The SDK over
the ``initialize`` handshake is timed after, for the record.

Two chats of one Playa host make the calls: one keeps its audit log, as every chat of a host
with a secret does, and one was set up without it. The call's targets are the call path's, the
second chat's; what each call's audit record adds (its sealing, and its share of a batch's write
and fsync) is shown beside them, from the same run. It has a target of its own, in ``bench
audit``: a record may add 200 µs to a call.

Then the same pair with 1 MB results (the ``blob`` tool), so the costs that grow with the size
of a result are compared with the SDK's, per MB. The model-bound gate redacts a result when the
model is sent it, not in the call: its cost per MB (the chat's redactor, live, since the server
was added with a bearer token) is timed on the same result, on its own.

Playa's own cost is the client CPU a call takes on top of the SDK's, as the median over the
rounds of one block per side of the difference between their CPU per call. Adjacent blocks
take ~0.1 s, so they mostly see the machine in the same state; totals over the whole run would
not (this VM switches between a fast and a slow state, see docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import anyio

from bench._common import Report, Spread, alternating_blocks, bench_server, sdk_client, timed_calls, verdict
from bench._playa import TOKEN, QuietUI, message, playa_in_tmp, unaudited_session
from playa.mcp_remote import RemoteMcpSettings

TARGET_RATIO = 1.05
TARGET_OWN_CPU = 100e-6
PER_BLOCK = 20
ARGS = {"text": "hello from the benchmark"}
BIG = 1_000_000
BIG_ARGS = {"size": BIG}
BIG_PER_BLOCK = 2
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
"""What both sides send the server: Playa's server was added with this bearer token."""


@dataclass
class _Samples:
    """What one run measured: per side, each call's wall time, and the client CPU per call of each block."""

    blocks: int
    big_blocks: int
    ours: list[float] = field(default_factory=list)
    """The call path: a chat without an audit log."""
    audited: list[float] = field(default_factory=list)
    """The same path in a chat that keeps one, as every chat of a host with a secret does."""
    sdk: list[float] = field(default_factory=list)
    conn: list[float] = field(default_factory=list)
    big_ours: list[float] = field(default_factory=list)
    big_sdk: list[float] = field(default_factory=list)
    redact_cpu: list[float] = field(default_factory=list)
    legacy: list[float] = field(default_factory=list)
    cpu: dict[str, list[float]] = field(
        default_factory=lambda: {
            "ours": [],
            "audited": [],
            "sdk": [],
            "conn": [],
            "big_ours": [],
            "big_sdk": [],
        }
    )

    def extra(self, side: str, base: str) -> float:
        """The median over rounds of the CPU per call ``side`` took beyond ``base``."""
        return statistics.median(x - y for x, y in zip(self.cpu[side], self.cpu[base], strict=True))


async def run(quick: bool) -> Report:
    calls = 200 if quick else 1000
    samples = _Samples(blocks=calls // PER_BLOCK, big_blocks=5 if quick else 25)
    await _measure(samples, quick)
    report = Report("calls", "1. Tool-call overhead (1,000 sequential echo calls, Streamable HTTP)")
    _report_calls(report, samples)
    _report_big(report, samples)
    return report


async def _measure(samples: _Samples, quick: bool) -> None:
    ours, sdk, conn, cpu = samples.ours, samples.sdk, samples.conn, samples.cpu
    big_ours, big_sdk, redact_cpu, legacy = (
        samples.big_ours,
        samples.big_sdk,
        samples.redact_cpu,
        samples.legacy,
    )
    blocks, big_blocks = samples.blocks, samples.big_blocks
    async with bench_server() as served, playa_in_tmp(RemoteMcpSettings()) as (host, extension):
        ui = QuietUI()
        audited = await host.session("console:bench", owner="owner")
        session = await unaudited_session(host, extension, "console:plain")
        for chat in (audited, session):
            reply = await host.handle(chat, message(f"/mcp_add bench {served.url} --bearer {TOKEN}"), ui)
            assert reply is not None and "bench__echo" in reply.text, reply
            result = await host.call_tool(chat, "bench__echo", ARGS)
            assert result.text == ARGS["text"] and not result.is_error, result
        state = extension.chat(session).servers["bench"]
        assert state.connection is not None
        connection = state.connection
        audit = extension.chat(audited).audit
        assert audit.enabled

        async def playa_call() -> object:
            return await host.call_tool(session, "bench__echo", ARGS)

        async def audited_call() -> object:
            return await host.call_tool(audited, "bench__echo", ARGS)

        async def connection_call() -> object:
            return await connection.call_tool("echo", ARGS)

        async with sdk_client(served.url, headers=HEADERS) as client:
            # A fair pair: both sides speak the same protocol version to the server.
            assert connection.protocol == client.protocol_version, (
                connection.protocol,
                client.protocol_version,
            )

            async def sdk_call() -> object:
                return await client.call_tool("echo", ARGS)

            for call in (playa_call, audited_call, sdk_call, connection_call):  # warm up every side
                for _ in range(20):
                    await call()
            await audit.flush()
            sides = [
                ("ours", playa_call, ours),
                ("audited", audited_call, samples.audited),
                ("sdk", sdk_call, sdk),
                ("conn", connection_call, conn),
            ]
            # Each call's audit record is written in a batch after it: in the block's CPU.
            await alternating_blocks(sides, blocks, PER_BLOCK, cpu, settle={"audited": audit.flush})

            # 1 MB results: the costs that grow with the result, side by side.
            async def big_playa_call() -> object:
                result = await host.call_tool(session, "bench__blob", BIG_ARGS)
                assert len(result.text) == BIG and not result.is_error, result.text[:200]
                return result

            async def big_sdk_call() -> object:
                result = await client.call_tool("blob", BIG_ARGS)
                assert not result.is_error
                return result

            for call in (big_playa_call, big_sdk_call):
                await call()
            big_sides = [("big_ours", big_playa_call, big_ours), ("big_sdk", big_sdk_call, big_sdk)]
            await alternating_blocks(big_sides, big_blocks, BIG_PER_BLOCK, cpu)
            # What the model-bound gate adds when the result is sent to the model: its redaction.
            text = (await host.call_tool(session, "bench__blob", BIG_ARGS)).text
            redactor = host.redactor(session)
            assert redactor and redactor.redact(text) is text  # live, and nothing to remove
            for _ in range(big_blocks * BIG_PER_BLOCK):
                before = time.process_time()
                redactor.redact(text)
                redact_cpu.append(time.process_time() - before)

            # For the record: the SDK over the initialize handshake, which answers with event streams.
            async with sdk_client(served.url, headers=HEADERS, mode="legacy") as legacy_client:
                await legacy_client.call_tool("echo", ARGS)
                await timed_calls(lambda: legacy_client.call_tool("echo", ARGS), 20 if quick else 50, legacy)


def _report_calls(report: Report, samples: _Samples) -> None:
    ours, sdk, conn, cpu, legacy = samples.ours, samples.sdk, samples.conn, samples.cpu, samples.legacy
    extra = samples.extra
    a, b, c, d = Spread.of(ours), Spread.of(sdk), Spread.of(conn), Spread.of(samples.audited)
    ratio = a.median / b.median
    report.add(
        "call, median (p25–p75)",
        a.text(),
        b.text(),
        f"{ratio:.3f}",
        f"≤ {TARGET_RATIO:.2f}",
        verdict(ratio <= TARGET_RATIO),
    )

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
        target=f"≤ {TARGET_OWN_CPU * 1e6:.0f} µs CPU",
        verdict=verdict(overhead <= TARGET_OWN_CPU),
    )
    report.add(
        "the call's audit record: client CPU (wall: median difference)",
        f"{extra('audited', 'ours') * 1e6:+.0f} µs CPU ({(d.median - a.median) * 1e6:+.0f} µs wall)",
        target="bench audit",
    )
    report.add(
        "call in a chat with its audit log, median (p25–p75)",
        d.text(),
        b.text(),
        f"{d.median / b.median:.3f}",
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
        'SDK Client(mode="legacy") (the initialize handshake)',
        Spread.of(legacy).text(),
        b.text(),
        f"{Spread.of(legacy).median / b.median:.2f}",
    )
    report.notes.append(
        "Baseline: the SDK's `Client`, its defaults, sending the same bearer token as Playa "
        "(`bench._common.sdk_client`): it negotiates the 2026 protocol with this "
        'server, as Playa does. The `mode="legacy"` row is the SDK over the initialize handshake, '
        "for the record, not the baseline. Playa's connection holds its change stream "
        "(subscriptions/listen, opened at its first call, in the warm-up); the baseline holds none."
    )
    report.notes.append(
        "The call's targets are the call path's: a chat without an audit log. A chat that keeps "
        "one (every chat of a host with a secret) adds each call's record, its seal and its share "
        "of a batch's write and fsync, which has a target of its own: ≤ 200 µs a call (bench audit)."
    )


def _report_big(report: Report, samples: _Samples) -> None:
    big_ours, big_sdk, cpu, redact_cpu = samples.big_ours, samples.big_sdk, samples.cpu, samples.redact_cpu
    big_blocks, extra = samples.big_blocks, samples.extra
    a, b, c = Spread.of(samples.ours), Spread.of(samples.sdk), Spread.of(samples.conn)
    big_a, big_b = Spread.of(big_ours), Spread.of(big_sdk)
    report.add(
        "1 MB result: call, median (p25–p75)",
        big_a.text(),
        big_b.text(),
        f"{big_a.median / big_b.median:.3f}",
    )
    big_extra = extra("big_ours", "big_sdk")
    big_cpu_sdk = statistics.median(cpu["big_sdk"])
    report.add(
        "1 MB result, client CPU per MB: Playa's own cost | the SDK's",
        f"{big_extra * 1e3 * 1e6 / BIG:+.1f} ms",
        f"{big_cpu_sdk * 1e3 * 1e6 / BIG:.1f} ms",
        f"{(big_cpu_sdk + big_extra) / big_cpu_sdk:.3f}",
    )
    report.add(
        "1 MB result: the gate's redaction, CPU per MB (when sent to the model)",
        f"{statistics.median(redact_cpu) * 1e3 * 1e6 / BIG:.1f} ms",
    )
    report.chart = {"Playa host.call_tool": a, "Playa Connection.call_tool": c, "SDK Client.call_tool": b}
    report.notes.append(
        f"{len(samples.ours)} calls per side in {samples.blocks} alternating blocks of {PER_BLOCK}, after 20 warm-up calls each; "
        "CPU differences: median over the rounds of one block per side. "
        f"1 MB results: {big_blocks * BIG_PER_BLOCK} calls per side in alternating blocks of {BIG_PER_BLOCK}"
    )


if __name__ == "__main__":
    from bench.__main__ import print_report

    print_report(anyio.run(run, True))
