"""Target 6: 1,000 chats with 2 servers each against one server process.

The baseline: the same 2,000 connections made by the bare SDK in a process of its own
(``bench._memory --side sdk-same``: what Playa sends per connection, ``server/discover`` and
``tools/list``, as many at once as Playa's connector allows; neither side holds a change stream,
which Playa opens when a connection is first called), timed until all are open, then closed. It
runs before Playa's storm and again after Playa's host has closed, and the storm is compared with
the mean of the two: the two sides cannot alternate (a chat opens once), and this machine changes
speed now and then, so a baseline on one side only would move the ratio. Then every chat's sealed
``servers.json`` is written, its entries holding the pins a first connect saved (as after a
restart: the first chat connects first, and its pins are every chat's); all sessions start at
once (each SessionStart connects in the background) and the clock runs until every chat's
connects have ended. A turn that calls a remote tool (``a__echo`` through the offline model) in
one chat is timed while all chats stay connected, in alternating blocks with the same turn in a
host that has that single chat (``bench._single_chat``, another process, the same server).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import anyio

from bench._common import ROOT, GcPauses, Report, Spread, bench_server, verdict
from bench._memory import hold_elsewhere
from bench._playa import data_dir, entry, playa_host, timed_echo_turns, token_of, write_servers
from playa.agent import Host
from playa.core import ChatSession
from playa.mcp_remote import ConnectionSettings, RemoteMcpExtension, RemoteMcpSettings

TARGET_CONNECT_RATIO = 1.5
TARGET_TURN_RATIO = 1.10
CONNECT_WAIT_LIMIT = 180.0  # seconds: the storm is waited out, but not forever


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def single_chat(url: str) -> Iterator[Callable[[int], list[float]]]:
    """Start ``bench._single_chat``; yield a function that runs N turns there and returns their times."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "bench._single_chat", "--url", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def turns(count: int) -> list[float]:
        stdin.write(f"{count}\n")
        stdin.flush()
        times: list[float] = json.loads(stdout.readline())
        return times

    try:
        if stdout.readline().strip() != "READY":
            raise RuntimeError("the single-chat process did not start")
        yield turns
    finally:
        stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class _Storm:
    """What the connect storm took: its time, the CPU of both processes, and how many connected."""

    took: float
    sessions_started: float
    client_used: float
    server_used: float
    connected: int
    reasons: dict[str, int]


async def _storm(
    host: Host, extension: RemoteMcpExtension, first: ChatSession, scopes: list[str], server_pid: int
) -> _Storm:
    """Open every chat but the first at once; time it until no connect is still under way."""
    client_cpu, server_cpu = os.times(), _cpu_seconds(server_pid)
    started = anyio.current_time()
    opened: dict[str, ChatSession] = {}

    async def open_chat(scope: str) -> None:
        opened[scope] = await host.session(scope, owner="owner")

    async with anyio.create_task_group() as tg:
        for scope in scopes[1:]:
            tg.start_soon(open_chat, scope)
    others = [opened[scope] for scope in scopes[1:]]
    sessions_started = anyio.current_time() - started
    # Connects queue (a connector runs a bounded number at once), and each chat's own
    # wait gives up after one ConnectTimeout: keep waiting, bounded, until none is
    # still connecting, so the crowded turns below are not timed during the storm.
    # One chat after another, no task each: 1,000 tasks a round would be the benchmark's own
    # CPU, counted as Playa's.
    servers_of = [extension.chat(session) for session in [first, *others]]
    with anyio.move_on_after(CONNECT_WAIT_LIMIT):
        while any(state.connecting for chat in servers_of for state in chat.servers.values()):
            for chat in servers_of:
                await chat.wait_for_connects()
    took = anyio.current_time() - started
    cpu_after = os.times()
    client_used = (cpu_after.user - client_cpu.user) + (cpu_after.system - client_cpu.system)
    server_used = _cpu_seconds(server_pid) - server_cpu
    states = [s for session in [first, *others] for s in extension.chat(session).servers.values()]
    connected = sum(s.status == "connected" for s in states)
    reasons: dict[str, int] = {}
    for state in states:
        if state.status != "connected":
            key = (state.reason or state.status)[:80]
            reasons[key] = reasons.get(key, 0) + 1

    return _Storm(took, sessions_started, client_used, server_used, connected, reasons)


async def run(quick: bool) -> Report:
    chats = 30 if quick else 1000
    blocks, per_block = (4, 10) if quick else (10, 20)
    report = Report("scale", f"6. Scale: {chats:,} chats × 2 servers against one server process")
    async with bench_server() as served:
        # The SDK's connections carry no chat: one credential serves them all.
        concurrency = ConnectionSettings().max_concurrent_connects
        sdk_before = await hold_elsewhere("sdk-same", chats * 2, served.url, concurrency)
        with data_dir() as data, single_chat(served.url) as single_turns:
            scopes = [f"console:chat{n:04d}" for n in range(chats)]
            first_entries = [entry(name, served.url, token_of(scopes[0])) for name in ("a", "b")]
            write_servers(data, scopes[0], first_entries)
            async with playa_host(data, RemoteMcpSettings()) as (host, extension):
                first = await host.session(scopes[0], owner="owner")
                await extension.chat(first).wait_for_connects()
                # A restarted bot's entries carry the pins their first connect saved (the tools
                # the owner approved); this server offers every chat the same tools.
                pins = {name: state.entry.pins for name, state in extension.chat(first).servers.items()}
                assert all(pins.values())
                for scope in scopes[1:]:
                    write_servers(
                        data,
                        scope,
                        [
                            replace(entry(name, served.url, token_of(scope)), pins=pins[name])
                            for name in ("a", "b")
                        ],
                    )
                await timed_echo_turns(host, first, 10)  # warm up

                storm = await _storm(host, extension, first, scopes, served.process.pid)
                took, connected, reasons = storm.took, storm.connected, storm.reasons
                # Connects that timed out are still being torn down: let the loop go quiet first.
                await anyio.sleep(2.0)
                crowded: list[float] = []
                alone: list[float] = []
                with GcPauses() as gc_crowded:
                    for block in range(blocks):
                        if block % 2:
                            alone += await anyio.to_thread.run_sync(single_turns, per_block)
                        crowded += await timed_echo_turns(host, first, per_block)
                        if not block % 2:
                            alone += await anyio.to_thread.run_sync(single_turns, per_block)
        sdk_after = await hold_elsewhere("sdk-same", chats * 2, served.url, concurrency)

    total = chats * 2
    runs = [sdk_before, sdk_after]
    seconds = [float(str(run.get("seconds", "nan"))) for run in runs]
    sdk_seconds = sum(seconds) / 2
    sdk_opened = min(int(str(run.get("opened", 0))) for run in runs)
    report.add(
        f"all {total:,} connections connected",
        f"{took:.1f} s, {connected:,}/{total:,} connected",
        f"{sdk_seconds:.1f} s (before {seconds[0]:.1f}, after {seconds[1]:.1f}), "
        f"{sdk_opened:,}/{total:,} open (SDK, no chats)",
        f"{took / sdk_seconds:.2f}",
        f"≤ {TARGET_CONNECT_RATIO:.1f}×, all",
        verdict(took <= TARGET_CONNECT_RATIO * sdk_seconds and connected == total and sdk_opened == total),
    )
    for when, run in zip(("before", "after"), runs, strict=True):
        if "error" in run:
            report.notes.append(f"the SDK's run {when} failed: {run['error']}")
    sdk_cpu = sum(float(str(run.get("cpu", "nan"))) for run in runs) / 2
    ours_per, theirs_per = storm.client_used / max(connected, 1), sdk_cpu / max(sdk_opened, 1)
    report.add(
        "client CPU per connection (the server's in all)",
        f"{ours_per * 1e3:.1f} ms (server {storm.server_used:.1f} s)",
        f"{theirs_per * 1e3:.1f} ms",
        f"{ours_per / theirs_per:.2f}",
    )
    a, b = Spread.of(crowded), Spread.of(alone)
    ratio = a.median / b.median
    report.add(
        f"turn with a tool call, {connected - 2:,} other connections open",
        a.text(),
        b.text(),
        f"{ratio:.3f}",
        f"≤ {TARGET_TURN_RATIO:.2f}",
        verdict(ratio <= TARGET_TURN_RATIO),
    )
    if reasons:
        report.notes.append("not connected: " + "; ".join(f"{n}× {r}" for r, n in reasons.items()))
    report.notes.append(
        f"sessions started in {storm.sessions_started:.1f} s (connects run in the background); baseline column: "
        "for the connects, the bare SDK making the same 2 connections × chats with the same requests "
        "(discover, tools/list; no change stream, which Playa opens only at a connection's first call) in "
        "a process of its own, before the storm and after the host closed (their mean); for the "
        "turn, the same turn in a host with that single chat, in another process, in alternating blocks"
    )
    report.notes.append(f"garbage collection during the crowded turns: {gc_crowded.text() or 'none'}")
    report.chart = {"connect_seconds": took, "connected": connected, "total": total, "crowded": a, "alone": b}
    return report
