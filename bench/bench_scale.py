"""Target 6: 1,000 chats with 2 servers each against one server process.

The baseline: the same 2,000 connections made by the bare SDK in a process of its own
(``bench._sdk_storm``: what Playa sends per connection, ``server/discover`` and ``tools/list``,
as many at once as Playa's connector allows; neither side holds a change stream, which Playa
opens when a connection is first called). Every chat's sealed ``servers.json`` is written first,
with its copy and record in the chat's private folder, its entries holding the pins a first
connect saved (as after a restart: the first chat connects first, and its pins are every chat's).
Then the storm runs in rounds, alternating with the SDK's: in each, a quarter of the chats start
at once (each SessionStart connects in the background) and the clock runs until every one of
their connects has ended, and the SDK opens as many connections again; each side's earlier
rounds stay open beside it. The two sides' totals are compared: the rounds are seconds apart, so
a change in the machine's speed (this VM switches between a fast and a slow state) hits both
alike, where one storm each, minutes apart, did not. Each side's round ends, inside its clock, with
a collection of the collector's young and middle generations (``gc.collect(1)``): every object
that lives on is scanned there once, sooner or later, and this way each side pays for what its
round made. Left to the collector, that pass comes after every fiftieth young collection, so
whether a side's rounds held one (~0.6 s over every object made since the last) depended on
where its counter stood when the storm began.
A turn that calls a remote tool (``a__echo`` through the offline model) in one chat is then timed
while all chats stay connected, in alternating blocks with the same turn in a host that has that
single chat (``bench._single_chat``, another process, the same server).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from bench._common import ROOT, GcPauses, Report, Spread, bench_server, child_env, verdict
from bench._playa import data_dir, entry, playa_host, timed_echo_turns, token_of, write_servers
from playa.agent import Host
from playa.core import ChatSession
from playa.mcp_remote import ConnectionSettings, RemoteMcpExtension, RemoteMcpSettings

TARGET_CONNECT_RATIO = 1.5
TARGET_TURN_RATIO = 1.10
CONNECT_WAIT_LIMIT = 180.0  # seconds: a round is waited out, but not forever
ROUNDS = 4


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _talking(module: str, *args: str) -> Iterator[Callable[[str], Any]]:
    """Start ``python -m module args``; once it says READY, yield a function that sends it one line
    and returns its JSON answer."""
    env = child_env()
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def ask(line: str) -> Any:
        stdin.write(f"{line}\n")
        stdin.flush()
        return json.loads(stdout.readline())

    try:
        if stdout.readline().strip() != "READY":
            raise RuntimeError(f"{module} did not start")
        yield ask
    finally:
        stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def single_chat(url: str) -> Iterator[Callable[[int], list[float]]]:
    """``bench._single_chat``: a function that runs N turns there and returns their times."""
    with _talking("bench._single_chat", "--url", url) as ask:

        def turns(count: int) -> list[float]:
            times: list[float] = ask(str(count))
            return times

        yield turns


@contextlib.contextmanager
def sdk_storm(url: str, concurrency: int) -> Iterator[Callable[[int], dict[str, Any]]]:
    """``bench._sdk_storm``: a function that opens N more connections there, and says what it took."""
    with _talking("bench._sdk_storm", "--url", url, "--concurrency", str(concurrency)) as ask:

        def storm_round(count: int) -> dict[str, Any]:
            result: dict[str, Any] = ask(str(count))
            return result

        yield storm_round


@dataclass
class _Storm:
    """What the connect storm's rounds took: their time, the CPU of both processes, how many connected."""

    took: float = 0.0
    sessions_started: float = 0.0
    client_used: float = 0.0
    server_used: float = 0.0
    connected: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    rounds: list[float] = field(default_factory=list)
    """Each round's seconds."""
    collected: float = 0.0
    """Seconds of the middle-generation passes that end the rounds."""


async def _storm_round(
    host: Host, extension: RemoteMcpExtension, scopes: list[str], server_pid: int, storm: _Storm
) -> None:
    """Open the chats of ``scopes`` at once; time it until none of their connects is under way."""
    client_cpu, server_cpu = os.times(), _cpu_seconds(server_pid)
    started = anyio.current_time()
    opened: dict[str, ChatSession] = {}

    async def open_chat(scope: str) -> None:
        opened[scope] = await host.session(scope, owner="owner")

    async with anyio.create_task_group() as tg:
        for scope in scopes:
            tg.start_soon(open_chat, scope)
    storm.sessions_started += anyio.current_time() - started
    # Connects queue (a connector runs a bounded number at once), and each chat's own
    # wait gives up after one ConnectTimeout: keep waiting, bounded, until none is
    # still connecting, so the crowded turns below are not timed during the storm.
    # One chat after another, no task each: a task per chat a round would be the benchmark's
    # own CPU, counted as Playa's.
    servers_of = [extension.chat(opened[scope]) for scope in scopes]
    with anyio.move_on_after(CONNECT_WAIT_LIMIT):
        while any(state.connecting for chat in servers_of for state in chat.servers.values()):
            for chat in servers_of:
                await chat.wait_for_connects()
    # The round's objects get their middle-generation pass before the clock stops, as the SDK's do.
    collected = anyio.current_time()
    gc.collect(1)
    storm.collected += anyio.current_time() - collected
    took = anyio.current_time() - started
    storm.took += took
    storm.rounds.append(took)
    cpu_after = os.times()
    storm.client_used += (cpu_after.user - client_cpu.user) + (cpu_after.system - client_cpu.system)
    storm.server_used += _cpu_seconds(server_pid) - server_cpu
    for state in (state for chat in servers_of for state in chat.servers.values()):
        if state.status == "connected":
            storm.connected += 1
        else:
            key = (state.reason or state.status)[:80]
            storm.reasons[key] = storm.reasons.get(key, 0) + 1


async def run(quick: bool) -> Report:
    chats = 30 if quick else 1000
    rounds = 2 if quick else ROUNDS
    blocks, per_block = (4, 10) if quick else (10, 20)
    report = Report("scale", f"6. Scale: {chats:,} chats × 2 servers against one server process")
    async with bench_server() as served:
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

                storm, sdk_rounds = _Storm(), []
                # The SDK's connections carry no chat: one credential serves them all.
                concurrency = ConnectionSettings().max_concurrent_connects
                with sdk_storm(served.url, concurrency) as sdk_round:
                    others = scopes[1:]
                    for number in range(rounds):
                        part = others[number * len(others) // rounds : (number + 1) * len(others) // rounds]
                        # Which side goes first alternates, so a drift in one direction favours neither.
                        if number % 2 == 0:
                            sdk_rounds.append(await anyio.to_thread.run_sync(sdk_round, 2 * len(part)))
                        await _storm_round(host, extension, part, served.process.pid, storm)
                        if number % 2 == 1:
                            sdk_rounds.append(await anyio.to_thread.run_sync(sdk_round, 2 * len(part)))
                first_connected = sum(s.status == "connected" for s in extension.chat(first).servers.values())
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

    total = chats * 2
    sdk_seconds = sum(float(r["seconds"]) for r in sdk_rounds)
    sdk_opened = sum(int(r["opened"]) for r in sdk_rounds)
    sdk_cpu = sum(float(r["cpu"]) for r in sdk_rounds)
    took, connected = storm.took, first_connected + storm.connected
    report.add(
        f"all {total:,} connections connected",
        f"{took:.1f} s, {connected:,}/{total:,} connected",
        f"{sdk_seconds:.1f} s, {sdk_opened:,}/{total - 2:,} open (SDK, no chats)",
        f"{took / sdk_seconds:.2f}",
        f"≤ {TARGET_CONNECT_RATIO:.1f}×, all",
        verdict(
            took <= TARGET_CONNECT_RATIO * sdk_seconds and connected == total and sdk_opened == total - 2
        ),
    )
    for number, sdk in enumerate(sdk_rounds, 1):
        if sdk.get("failures"):
            report.notes.append(f"the SDK's round {number}: not opened: {sdk['failures']}")
    ours_per, theirs_per = storm.client_used / max(storm.connected, 1), sdk_cpu / max(sdk_opened, 1)
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
    if storm.reasons:
        report.notes.append("not connected: " + "; ".join(f"{n}× {r}" for r, n in storm.reasons.items()))
    per_round = ", ".join(
        f"{ours:.1f}/{float(sdk['seconds']):.1f}" for ours, sdk in zip(storm.rounds, sdk_rounds, strict=True)
    )
    report.notes.append(
        f"{rounds} rounds of about {(chats - 1) // rounds:,} chats (Playa/SDK seconds: {per_round}), which side goes "
        f"first alternating; sessions started in {storm.sessions_started:.1f} s in all (connects run in the "
        "background). Baseline column: for the connects, the bare SDK making the same 2 connections a chat "
        "with the same requests (discover, tools/list; no change stream, which Playa opens only at a "
        "connection's first call) in a process of its own, its earlier rounds held open; for the turn, the "
        "same turn in a host with that single chat, in another process, in alternating blocks"
    )
    sdk_collected = sum(float(r["collected"]) for r in sdk_rounds)
    report.notes.append(
        f"each round ends with the young and middle generations collected (gc.collect(1)), inside its "
        f"clock: {storm.collected:.2f} s of Playa's rounds, {sdk_collected:.2f} s of the SDK's"
    )
    report.notes.append(f"garbage collection during the crowded turns: {gc_crowded.text() or 'none'}")
    report.chart = {"connect_seconds": took, "connected": connected, "total": total, "crowded": a, "alone": b}
    return report
