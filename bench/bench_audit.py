"""Target: the audit log adds at most 200 µs to a tool call (its fsync batched, off the event loop).

Two chats of one host call the same server's echo tool: one keeps its audit log as every chat
does, the other was set up without one. They run in alternating blocks of 20 calls, in a data
dir on the real disk, so every batch's fsync costs what it costs. The added cost is the median
over the rounds of the difference of wall time per call between the two chats, and the same for
the client's CPU; the log is verified at the end (every call recorded, the chain whole).
"""

from __future__ import annotations

import statistics
import time

from bench._common import Report, Spread, alternating_blocks, bench_server, verdict
from bench._playa import TOKEN, QuietUI, data_dir, host_secret, message, playa_host, unaudited_session
from playa.core import session_state_dir
from playa.mcp_remote import AuditKey, RemoteMcpSettings, audit_folder, verify_log

TARGET = 200e-6
PER_BLOCK = 20
ARGS = {"text": "hello from the benchmark"}


async def run(quick: bool) -> Report:
    blocks = 10 if quick else 50
    report = Report("audit", "Audit log: what a record adds to a tool call (echo, Streamable HTTP)")
    audited: list[float] = []
    plain: list[float] = []
    cpu: dict[str, list[float]] = {"audited": [], "plain": []}
    with data_dir() as data:
        async with bench_server() as served, playa_host(data, RemoteMcpSettings()) as (host, extension):
            ui = QuietUI()
            chat = await host.session("console:audited", owner="owner")
            bare = await unaudited_session(host, extension, "console:plain")
            assert extension.chat(chat).audit.enabled
            for session in (chat, bare):
                reply = await host.handle(
                    session, message(f"/mcp_add bench {served.url} --bearer {TOKEN}"), ui
                )
                assert reply is not None and "bench__echo" in reply.text, reply

            async def audited_call() -> object:
                return await host.call_tool(chat, "bench__echo", ARGS)

            async def plain_call() -> object:
                return await host.call_tool(bare, "bench__echo", ARGS)

            for call in (audited_call, plain_call):  # warm up both sides
                for _ in range(20):
                    await call()
            sides = [("audited", audited_call, audited), ("plain", plain_call, plain)]
            log = extension.chat(chat).audit
            # A block's records are written in a batch after it: in the block's CPU.
            await alternating_blocks(sides, blocks, PER_BLOCK, cpu, settle={"audited": log.flush})
            # The event loop's share alone: building and queueing a record.
            loop_cost: list[float] = []
            for _ in range(blocks):
                before = time.perf_counter()
                for _ in range(PER_BLOCK):
                    log.record(
                        "tool_call", sender="owner", server="bench", tool="echo", outcome="ok", duration_us=1
                    )
                loop_cost.append((time.perf_counter() - before) / PER_BLOCK)
            await log.flush()
        found = verify_log(
            audit_folder(session_state_dir(data, "console:audited")),
            "console:audited",
            AuditKey(host_secret(data).value),
        )
    calls = sum(1 for r in found.records if r.kind == "tool_call")
    assert found.ok and calls == 20 + 2 * blocks * PER_BLOCK, (found.breaks, calls)

    a, b = Spread.of(audited), Spread.of(plain)
    per_round = len(audited) // PER_BLOCK
    wall = statistics.median(
        statistics.mean(audited[i * PER_BLOCK : (i + 1) * PER_BLOCK])
        - statistics.mean(plain[i * PER_BLOCK : (i + 1) * PER_BLOCK])
        for i in range(per_round)
    )
    extra_cpu = statistics.median(x - y for x, y in zip(cpu["audited"], cpu["plain"], strict=True))
    report.add("call, median (p25–p75)", a.text(), b.text(), f"{a.median / b.median:.3f}")
    report.add(
        "added per call: wall (median difference of blocks)",
        f"{wall * 1e6:+.0f} µs",
        target=f"≤ {TARGET * 1e6:.0f} µs",
        verdict=verdict(wall <= TARGET),
    )
    report.add("added per call: client CPU (median difference of blocks)", f"{extra_cpu * 1e6:+.0f} µs")
    report.add("a record on the event loop (build and queue)", f"{statistics.median(loop_cost) * 1e6:.1f} µs")
    report.notes.append(
        f"{len(audited)} calls per side in {blocks} alternating blocks of {PER_BLOCK}, after 20 warm-up "
        f"calls each; baseline: a chat of the same host without an audit log. The log held {len(found.records)} "
        "records at the end, verified whole."
    )
    report.chart = {"audited call": a, "call without the audit": b}
    return report
