"""Targets 3 and 4: what BeforeAgentStart costs a turn, with healthy servers and with a dead one.

3. One chat with 20 healthy servers (one server process, 20 entries) and an unchanged
   ``servers.json``: the time of ``RemoteMcpExtension.on_before_agent_start``.
4. One chat whose only server is a blackhole (accepts TCP, never answers), with a 2 s
   ConnectTimeout: the first turn waits for the connect to time out; later turns, while the
   backoff runs, are compared with turns of a chat without servers, alternating. Then the
   retry turns: the extension's clock is moved past the backoff before each, so the turn
   retries the server and waits for that connect, bounded by the ConnectTimeout (SPEC:
   BeforeAgentStart waits for connects in flight).

Turns use the offline model (no network). The data dir is on the disk this repository lives
on, and both chats' histories grow with every turn, as in real use.
"""

from __future__ import annotations

import statistics
import time

import anyio

from bench._common import Report, Spread, bench_server, blackhole, verdict
from bench._playa import QuietUI, alternating_turns, data_dir, entry, message, playa_host, write_servers
from playa.mcp_remote import ConnectionSettings, RemoteMcpSettings

TARGET_BEFORE_TURN = 2e-3
CONNECT_TIMEOUT = 2.0
TARGET_FIRST_TURN = CONNECT_TIMEOUT + 0.5
TARGET_LATER_TURN = 5e-3


async def run_before_turn(quick: bool) -> Report:
    count = 200 if quick else 2000
    servers = 20
    report = Report("before-turn", f"3. BeforeAgentStart with {servers} healthy servers, file unchanged")
    async with bench_server() as served:
        with data_dir() as data:
            scope = "console:bench"
            write_servers(data, scope, [entry(f"s{n:02d}", served.url) for n in range(servers)])
            async with playa_host(data, RemoteMcpSettings()) as (host, extension):
                session = await host.session(scope, owner="owner")
                chat = extension.chat(session)
                with anyio.fail_after(60):
                    await chat.wait_for_connects()
                connected = sum(state.status == "connected" for state in chat.servers.values())
                assert connected == servers, f"only {connected} of {servers} servers connected"
                empty = await host.session("console:empty", owner="owner")
                times: list[float] = []
                baseline: list[float] = []
                for _ in range(count):
                    started = anyio.current_time()
                    await extension.on_before_agent_start(session)
                    times.append(anyio.current_time() - started)
                    started = anyio.current_time()
                    await extension.on_before_agent_start(empty)
                    baseline.append(anyio.current_time() - started)
                tools = len(session.tools.active())
    spread = Spread.of(times)
    report.add(
        "on_before_agent_start, median (p25–p75)",
        spread.text(1e6, "µs", 0),
        Spread.of(baseline).text(1e6, "µs", 0),
        target="≤ 2 ms",
        verdict=verdict(spread.median <= TARGET_BEFORE_TURN),
    )
    report.notes.append(
        f"{servers} servers connected, {tools} active tools; baseline column: the same hook for a chat "
        "without servers"
    )
    report.chart = {"with 20 servers": spread, "no servers": Spread.of(baseline)}
    return report


async def run_dead_server(quick: bool) -> Report:
    turns = 40 if quick else 300
    retries = 3 if quick else 10
    report = Report(
        "dead-server", f"4. One blackholed server (ConnectTimeout {CONNECT_TIMEOUT:.0f} s instead of 15 s)"
    )
    settings = RemoteMcpSettings(connection=ConnectionSettings(connect_timeout=CONNECT_TIMEOUT))
    ui = QuietUI()
    skipped = 0.0  # seconds the extension's clock is ahead of the real one

    def clock() -> float:
        return time.time() + skipped

    async with blackhole() as hole:
        with data_dir() as data:
            dead_scope = "console:dead"
            write_servers(data, dead_scope, [entry("dead", hole.url)])
            async with playa_host(data, settings, clock=clock) as (host, extension):
                # The turn with no servers goes first, so imports and caches are warm for both.
                empty = await host.session("console:empty", owner="owner")
                for _ in range(5):
                    await host.handle(empty, message("hello"), ui)
                started = anyio.current_time()
                dead = await host.session(dead_scope, owner="owner")
                reply = await host.handle(dead, message("hello"), ui)
                first = anyio.current_time() - started
                assert reply is not None
                state = extension.chat(dead).servers["dead"]
                assert state.status == "unavailable", state.status

                # Both histories grow alike, a turn each in turn.
                ours, theirs = await alternating_turns(host, (dead, empty), turns)
                still = extension.chat(dead).servers["dead"].status
                before_retries = hole.accepted
                retry: list[float] = []
                for _ in range(retries):
                    skipped += settings.backoff_max + 1  # whatever the failures so far, it is due
                    began = anyio.current_time()
                    await host.handle(dead, message("hello"), ui)
                    retry.append(anyio.current_time() - began)
                retried = hole.accepted - before_retries
                accepted = hole.accepted
    report.add(
        "first turn (session start → reply)",
        f"{first:.3f} s",
        target=f"≤ {TARGET_FIRST_TURN:.1f} s",
        verdict=verdict(first <= TARGET_FIRST_TURN),
    )
    a, b = Spread.of(ours), Spread.of(theirs)
    diff = a.median - b.median
    report.add(
        "later turn, median (p25–p75)",
        a.text(),
        b.text(),
        f"{diff * 1e3:+.2f} ms",
        "within 5 ms",
        verdict(abs(diff) <= TARGET_LATER_TURN),
    )
    paired = statistics.median(o - t for o, t in zip(ours, theirs, strict=True))
    report.add("later turn, median of paired differences", f"{paired * 1e3:+.2f} ms")
    r = Spread.of(retry)
    report.add(
        "retry turn (backoff passed), median (p25–p75)",
        r.text(scale=1.0, unit="s", digits=3),
        target=f"≤ {TARGET_FIRST_TURN:.1f} s",
        verdict=verdict(r.p75 <= TARGET_FIRST_TURN),
    )
    report.notes.append(
        f"baseline column: the same turn in a chat without servers; the blackhole accepted {accepted} "
        f"connection(s); the server is still {still} after the later turns (backoff 60 s); "
        f"the {retries} retry turns each waited for a connect to the blackhole ({retried} accepted)"
    )
    report.chart = {"first_turn": first, "dead server": a, "no servers": b, "retry turn": r}
    return report
