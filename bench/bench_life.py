"""A host's long life: a growing history on a real disk, the event loop's lag, shutdown, memory.

- history: turns of a chat with 10 turns of history against one with 3,000, alternating, in a
  data dir on the disk this repository lives on (not tmpfs: the fsync is real); each chat has a
  credential, so the model gate has something to look for. Judged in a context both chats'
  requests fill alike (``SMALL_CONTEXT``), so only the history's length differs; then again in
  the default context, where the long chat's requests are larger.
- loop lag: a probe task asks for a 1 ms sleep over and over during those turns; how late it
  wakes is how long something held the event loop (pydantic-ai's and the offline model's work
  as well as Playa's). Playa's own synchronous steps of a turn (choosing the history window,
  the instructions, each batch of the model gate) are timed each time they run, in CPU time
  less any garbage collection inside them (listed on its own): the longest is the target.
- shutdown: a host with many chats, one open connection each, leaves its ``async with``.
- memory: chats touched once each (a server with the chat's own key, one turn), then closed as
  idle; resident memory after the first tenth and after all of them.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import resource
import statistics
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart

from bench._common import (
    ROOT,
    Report,
    Spread,
    bench_server,
    cpu_seconds,
    reference,
    rss_bytes,
    verdict,
)
from bench._playa import (
    QuietUI,
    alternating_turns,
    data_dir,
    entry,
    message,
    playa_host,
    token_of,
    write_servers,
)
from playa.agent import GatedModel, History, Host, HostConfig
from playa.agent import _host as host_module
from playa.core import ChatSession, Extension, Redactor, scope_folder
from playa.mcp_remote import ConnectionSettings, RemoteMcpSettings

TARGET_HISTORY_RATIO = 1.10
SMALL_CONTEXT = 6_000
"""The context of the judged turn ratio: the 3,000-turn chat's request and the 10-turn chat's
hold alike many messages, so what differs is the history's length alone. In a larger context
the shorter chat's requests are smaller too, and pydantic-ai's work per message shows."""
TARGET_LAG = 5e-3
TARGET_MEMORY = 0.10
MEMORY_BATCH = 50  # chats touched at once; divides both counts and their tenths


async def write_history(data: Path, scope: str, turns: int) -> None:
    """Give the chat ``turns`` turns of history, written as one append."""
    history = await History.open(data / "sessions" / scope_folder(scope))
    messages: list[ModelMessage] = []
    for n in range(turns):
        messages.append(ModelRequest.user_text_prompt(f"question {n}: what is the weather like today?"))
        messages.append(ModelResponse(parts=[TextPart(f"answer {n}: the offline model cannot know.")]))
    await history.extend(messages)


class ChatKeys(Extension):
    """Gives each chat a credential of its own, as a chat with a server has: the gate has work."""

    def credentials(self, session: ChatSession) -> Collection[str]:
        return [f"Bearer {token_of(session.scope)}"]


@dataclass
class Step:
    """One run of one of Playa's synchronous steps."""

    cpu: float
    """The CPU time of the thread that ran it: Playa's own work, whatever else the machine did."""
    wall: float
    """The wall time, which also holds any time the machine ran something else instead."""


@contextlib.contextmanager
def timed_steps(steps: dict[str, list[Step]], collections: list[float]) -> Iterator[None]:
    """Time every run of Playa's own synchronous steps of a turn, by name, while inside.

    The steps: the history window, the instructions, a batch of the model gate, and each step
    of a redactor building its block filter.

    A garbage collection that lands inside a step is the collector's, not the step's: whoever
    allocates when the young generation is full pays it, Playa or pydantic-ai. It is taken out
    of the step's time and listed in ``collections``.
    """
    patched: list[tuple[object, str]] = [
        (host_module, "_window"),
        (Host, "instructions"),
        (GatedModel, "gate_batch"),
    ]
    originals = {name: getattr(owner, name) for owner, name in patched}
    # The collections' wall and CPU time so far, and when the running one started.
    paused = {"wall": 0.0, "cpu": 0.0, "wall started": 0.0, "cpu started": 0.0}

    loop_thread = threading.get_ident()

    def collected(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            paused["wall started"], paused["cpu started"] = time.perf_counter(), time.thread_time()
        else:
            took = time.perf_counter() - paused["wall started"]
            paused["wall"] += took
            if threading.get_ident() == loop_thread:  # another thread's CPU is not the step's
                paused["cpu"] += time.thread_time() - paused["cpu started"]
            collections.append(took)

    @contextlib.contextmanager
    def step(name: str) -> Iterator[None]:
        wall, cpu, before = time.perf_counter(), time.thread_time(), dict(paused)
        try:
            yield
        finally:
            steps.setdefault(name, []).append(
                Step(
                    cpu=time.thread_time() - cpu - (paused["cpu"] - before["cpu"]),
                    wall=time.perf_counter() - wall - (paused["wall"] - before["wall"]),
                )
            )

    def timer(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with step(name):
                return original(*args, **kwargs)

        return timed

    def stepper(name: str, original: Callable[..., Iterator[None]]) -> Callable[..., Iterator[None]]:
        # A generator run a step at a time: each step is one of Playa's synchronous steps.
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Iterator[None]:
            inner = original(*args, **kwargs)
            while True:
                with step(name):
                    try:
                        next(inner)
                    except StopIteration:
                        return
                yield

        return timed

    for owner, name in patched:
        setattr(owner, name, timer(name, originals[name]))
    stepped = Redactor.filter_steps
    Redactor.filter_steps = stepper("filter step", stepped)  # type: ignore[method-assign]
    gc.callbacks.append(collected)
    try:
        yield
    finally:
        gc.callbacks.remove(collected)
        for owner, name in patched:
            setattr(owner, name, originals[name])
        Redactor.filter_steps = stepped  # type: ignore[method-assign]


class LagProbe:
    """Measures how late a 1 ms sleep wakes up: the longest time the loop was held.

    Each wake-up's lateness is kept twice: as measured (``lags``), and bounded by the work that
    can hold the loop (``held``): the loop's own thread's CPU time, and the Python work of the
    process's other threads (their user time: a thread holding the interpreter lock holds the
    loop too). What the kernel does for another thread (a history file's fsync) and time in
    which the machine ran something else are in the first figure only.
    """

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.held: list[float] = []
        self.running = True

    async def run(self) -> None:
        while self.running:
            before, work = anyio.current_time(), _loop_holding_work()
            await anyio.sleep(0.001)
            lag = anyio.current_time() - before - 0.001
            self.lags.append(lag)
            self.held.append(min(lag, _loop_holding_work() - work))


def _loop_holding_work() -> float:
    """The CPU seconds so far that can hold an event loop on this thread (see ``LagProbe``): this
    thread's CPU time, and the user time of the others (the kernel's split of a thread's time into
    user and system is estimated from its ticks; their Python work here is small)."""
    own = resource.getrusage(resource.RUSAGE_THREAD)
    process = resource.getrusage(resource.RUSAGE_SELF)
    return time.thread_time() + max(0.0, process.ru_utime - own.ru_utime)


async def run_history(quick: bool) -> Report:
    turns = 20 if quick else 200
    long_history = 300 if quick else 3000
    report = Report("history", f"5. Turns with {long_history} turns of history vs 10, on a real disk")
    with data_dir() as data:
        for name, count in (
            ("short", 10),
            ("long", long_history),
            ("short-full", 10),
            ("long-full", long_history),
        ):
            await write_history(data, f"console:{name}", count)
        # The judged comparison: a context both requests fill alike, so only the history's length differs.
        windows: dict[str, list[int]] = {}
        async with Host(HostConfig(data_dir=data, context_tokens=SMALL_CONTEXT), [ChatKeys()]) as host:
            short = await host.session("console:short", owner="owner")
            long = await host.session("console:long", owner="owner")
            await warm_up(host, (short, long))
            with window_lengths(windows):
                ours, theirs = await alternating_turns(host, (long, short), turns)
        # The default context: Playa's own steps at their largest, the loop's lag, and what a
        # full window costs a turn against a 10-turn chat's.
        probe = LagProbe()
        async with Host(HostConfig(data_dir=data), [ChatKeys()]) as host, anyio.create_task_group() as tg:
            short = await host.session("console:short-full", owner="owner")
            long = await host.session("console:long-full", owner="owner")
            full_context = host.context.tokens
            await warm_up(host, (short, long))
            tg.start_soon(probe.run)
            steps: dict[str, list[Step]] = {}
            collections: list[float] = []
            with timed_steps(steps, collections), window_lengths(windows):
                full_ours, full_theirs = await alternating_turns(host, (long, short), turns)
            probe.running = False
            # Playa's own part of a turn: appending it to the history file.
            appends: dict[str, list[float]] = {"long": [], "short": []}
            append_probe = LagProbe()
            tg.start_soon(append_probe.run)
            for n in range(turns):
                for name, session in (("long", long), ("short", short)):
                    began = anyio.current_time()
                    await host.history(session).extend(
                        [ModelRequest.user_text_prompt(f"q{n}"), ModelResponse(parts=[TextPart(f"a{n}")])]
                    )
                    appends[name].append(anyio.current_time() - began)
            append_probe.running = False
    a, b = Spread.of(ours), Spread.of(theirs)
    ratio = a.median / b.median
    sent = {scope: f"{min(lengths)}–{max(lengths)}" for scope, lengths in windows.items()}
    report.add(
        f"turn, median (p25–p75), a {SMALL_CONTEXT:,}-token context",
        a.text(),
        b.text(),
        f"{ratio:.2f}×",
        f"≤ {TARGET_HISTORY_RATIO:.2f}×",
        verdict(ratio <= TARGET_HISTORY_RATIO),
    )
    report.add(
        "  messages sent with each request",
        sent["console:long"],
        sent["console:short"],
    )
    fa, fb = Spread.of(full_ours), Spread.of(full_theirs)
    report.add(
        f"turn, median (p25–p75), the default {full_context:,}-token context",
        fa.text(),
        fb.text(),
        f"{fa.median / fb.median:.2f}×",
    )
    report.add(
        "  messages sent with each request",
        sent["console:long-full"],
        sent["console:short-full"],
    )
    longest = {name: max(run.cpu for run in runs) for name, runs in steps.items()}
    own = max(longest.values())
    report.add(
        "Playa's longest synchronous step in a turn, CPU",
        f"{own * 1e3:.2f} ms ("
        + ", ".join(f"{name} {value * 1e3:.2f}" for name, value in sorted(longest.items()))
        + ")",
        target=f"≤ {TARGET_LAG * 1e3:.0f} ms",
        verdict=verdict(own <= TARGET_LAG),
    )
    slowest = max((run for runs in steps.values() for run in runs), key=lambda run: run.wall)
    report.add(
        "  the same, wall clock",
        f"{slowest.wall * 1e3:.2f} ms (that step's CPU {slowest.cpu * 1e3:.2f} ms; the rest is time "
        "the machine ran something else)",
    )
    lag = Spread.of(probe.lags)
    report.add(
        "  garbage collections during the turns",
        f"{len(collections)}, longest {max(collections, default=0.0) * 1e3:.2f} ms (taken out of the steps)",
    )
    report.add(
        "event-loop lag during the turns, max (all work on the loop)",
        f"{max(probe.held) * 1e3:.2f} ms held by work (as measured: {max(probe.lags) * 1e3:.2f} ms)",
    )
    report.add("event-loop lag, median (p25–p75)", lag.text())
    la, lb = Spread.of(appends["long"]), Spread.of(appends["short"])
    append_ratio = la.median / lb.median
    report.add(
        "history append (Playa's part), median",
        la.text(),
        lb.text(),
        f"{append_ratio:.2f}×",
        f"≤ {TARGET_HISTORY_RATIO:.2f}×",
        verdict(append_ratio <= TARGET_HISTORY_RATIO),
    )
    append_worst = max(append_probe.held)
    report.add(
        "event-loop lag during history appends, max, held by work",
        f"{append_worst * 1e3:.2f} ms (as measured: {max(append_probe.lags) * 1e3:.2f} ms)",
        target=f"≤ {TARGET_LAG * 1e3:.0f} ms",
        verdict=verdict(append_worst <= TARGET_LAG),
    )
    report.notes.append(
        f"baseline column: the same turns in a chat that starts with 10 turns of history (each chat "
        f"takes {turns} turns); data dir on {ROOT} (fsync per turn). The judged ratio uses a context "
        "that both chats' requests fill alike; in the default context the 10-turn chat's requests are "
        "smaller, and the difference is pydantic-ai preparing each message of the larger request. The "
        "loop-lag probe includes the offline model's and pydantic-ai's own work, which runs on the loop"
    )
    report.chart = {f"{long_history:,} turns": a, "10 turns": b}
    return report


async def warm_up(host: Host, chats: tuple[ChatSession, ...]) -> None:
    ui = QuietUI()
    for _ in range(5):
        for chat in chats:
            await host.handle(chat, message("hello"), ui)


@contextlib.contextmanager
def window_lengths(lengths: dict[str, list[int]]) -> Iterator[None]:
    """Record, by chat, how many messages of its history each request sends, while inside."""
    original = host_module._window

    @functools.wraps(original)
    def recorded(*args: Any, **kwargs: Any) -> list[ModelMessage]:
        window = original(*args, **kwargs)
        scope = kwargs["scope"] if "scope" in kwargs else args[-1]
        lengths.setdefault(scope, []).append(len(window))
        return window

    host_module._window = recorded
    try:
        yield
    finally:
        host_module._window = original


async def run_shutdown(quick: bool) -> Report:
    chats = 200 if quick else 2000
    close_timeout = 2.0
    report = Report("shutdown", f"6. Shutdown of {chats} chats with an open connection each")
    settings = RemoteMcpSettings(
        connection=ConnectionSettings(close_timeout=close_timeout, max_concurrent_connects=64)
    )
    async with bench_server() as served:
        with data_dir() as data:
            scopes = [f"console:c{n}" for n in range(chats)]
            for scope in scopes:
                write_servers(data, scope, [entry("a", served.url, token_of(scope))])
            loops = [statistics.median(cpu_seconds(reference) for _ in range(5))]
            async with playa_host(data, settings) as (host, extension):
                for scope in scopes:
                    await host.session(scope, owner="owner")
                connected = 0
                with anyio.fail_after(600):
                    for scope in scopes:
                        chat = extension.chat(await host.session(scope, owner="owner"))
                        await chat.wait_for_connects()
                        connected += sum(state.connection is not None for state in chat.servers.values())
                started = anyio.current_time()
            took = anyio.current_time() - started
            loops.append(statistics.median(cpu_seconds(reference) for _ in range(5)))
    bound = close_timeout + 1.0
    report.add(
        "host exit",
        f"{took:.2f} s",
        target=f"≤ {bound:.1f} s (close timeout + 1 s)",
        verdict=verdict(took <= bound and connected == chats),
    )
    report.add(
        "the machine: reference loop, before and after",
        f"{loops[0] * 1e3:.1f} / {loops[1] * 1e3:.1f} ms",
    )
    report.notes.append(
        f"{connected} of {chats} connections open at shutdown; the exit is the client's CPU work, "
        "so it takes longer as the reference loop does (see the redaction benchmark)"
    )
    report.chart = {"shutdown": took}
    return report


async def run_memory(quick: bool) -> Report:
    chats = 2000 if quick else 10_000
    report = Report(
        "memory", f"7. Resident memory across {chats} chats touched once, each with its own server key"
    )
    ui = QuietUI()
    marks: dict[int, int] = {}
    async with bench_server() as served:
        with data_dir() as data:
            async with playa_host(data, RemoteMcpSettings()) as (host, _extension):

                async def touch(n: int) -> None:
                    scope = f"console:m{n}"
                    write_servers(data, scope, [entry("a", served.url, token_of(scope))])
                    session = await host.session(scope, owner="owner")
                    await host.handle(session, message("hello"), ui)

                # A bot's chats come at once: MEMORY_BATCH of them at a time, then the idle close.
                for batch in range(0, chats, MEMORY_BATCH):
                    async with anyio.create_task_group() as tg:
                        for n in range(batch, min(batch + MEMORY_BATCH, chats)):
                            tg.start_soon(touch, n)
                    await host.evict_idle(0)
                    if batch + MEMORY_BATCH in (chats // 10, chats):
                        gc.collect()
                        marks[batch + MEMORY_BATCH] = rss_bytes()
                open_sessions = host.open_sessions
    first, last = marks[chats // 10], marks[chats]
    growth = last / first - 1
    report.add(
        f"resident memory after {chats // 10} chats → after {chats}",
        f"{first / 2**20:.1f} MiB → {last / 2**20:.1f} MiB",
        ratio=f"{growth:+.1%}",
        target=f"within ±{TARGET_MEMORY:.0%}",
        verdict=verdict(abs(growth) <= TARGET_MEMORY),
    )
    report.notes.append(
        f"{open_sessions} sessions open at the end; each chat connected its server (its own bearer "
        "token) and ran one offline turn"
    )
    report.chart = {"first": first, "last": last}
    return report
