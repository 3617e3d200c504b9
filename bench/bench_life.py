"""A host's long life: a growing history on a real disk, the event loop's lag, shutdown, memory.

- history: turns of a chat with 10 turns of history against one with 3,000, alternating, in a
  data dir on the disk this repository lives on (not tmpfs: the fsync is real); each chat has a
  credential, so the model gate has something to look for.
- loop lag: a probe task asks for a 1 ms sleep over and over during those turns; how late it
  wakes is how long something held the event loop (pydantic-ai's and the offline model's work
  as well as Playa's). Playa's own synchronous steps of a turn (choosing the history window,
  the instructions, each batch of the model gate) are timed each time they run, less any
  garbage collection inside them (listed on its own): the longest is the target.
- shutdown: a host with many chats, one open connection each, leaves its ``async with``.
- memory: chats touched once each (a server with the chat's own key, one turn), then closed as
  idle; resident memory after the first tenth and after all of them.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart

from bench._common import ROOT, Report, Spread, bench_server, rss_bytes, verdict
from bench._playa import QuietUI, alternating_turns, entry, message, playa_host, token_of, write_servers
from playa.host import ChatSession, Extension, GatedModel, History, Host, HostConfig, Redactor, scope_folder
from playa.mcp_remote import ConnectionSettings, RemoteMcpSettings

TARGET_HISTORY_RATIO = 1.10
TARGET_LAG = 5e-3
TARGET_MEMORY = 0.10
MEMORY_BATCH = 50  # chats touched at once; divides both counts and their tenths


@contextlib.contextmanager
def disk_dir() -> Iterator[Path]:
    """A data dir beside the repository: a real disk, so every fsync costs what it costs."""
    path = Path(tempfile.mkdtemp(prefix=".bench-data-", dir=ROOT))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


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


@contextlib.contextmanager
def timed_steps(steps: dict[str, list[float]], collections: list[float]) -> Iterator[None]:
    """Time every run of Playa's own synchronous steps of a turn, by name, while inside.

    The steps: the history window, the instructions, a batch of the model gate, and each step
    of a redactor building its block filter.

    A garbage collection that lands inside a step is the collector's, not the step's: whoever
    allocates when the young generation is full pays it, Playa or pydantic-ai. It is taken out
    of the step's time and listed in ``collections``.
    """
    patched: list[tuple[type, str]] = [(Host, "_window"), (Host, "instructions"), (GatedModel, "gate_batch")]
    originals = {name: getattr(owner, name) for owner, name in patched}
    paused = [0.0, 0.0]  # the collections' time so far, and when the running one started

    def collected(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            paused[1] = time.perf_counter()
        else:
            took = time.perf_counter() - paused[1]
            paused[0] += took
            collections.append(took)

    def timer(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started, before = time.perf_counter(), paused[0]
            try:
                return original(*args, **kwargs)
            finally:
                steps.setdefault(name, []).append(time.perf_counter() - started - (paused[0] - before))

        return timed

    def stepper(name: str, original: Callable[..., Iterator[None]]) -> Callable[..., Iterator[None]]:
        # A generator run a step at a time: each step is one of Playa's synchronous steps.
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Iterator[None]:
            inner = original(*args, **kwargs)
            while True:
                started, before = time.perf_counter(), paused[0]
                try:
                    next(inner)
                except StopIteration:
                    return
                finally:
                    steps.setdefault(name, []).append(time.perf_counter() - started - (paused[0] - before))
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
    """Measures how late a 1 ms sleep wakes up: the longest time the loop was held."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.running = True

    async def run(self) -> None:
        while self.running:
            before = anyio.current_time()
            await anyio.sleep(0.001)
            self.lags.append(anyio.current_time() - before - 0.001)


async def run_history(quick: bool) -> Report:
    turns = 20 if quick else 200
    long_history = 300 if quick else 3000
    report = Report("history", f"5. Turns with {long_history} turns of history vs 10, on a real disk")
    ui = QuietUI()
    probe = LagProbe()
    with disk_dir() as data:
        await write_history(data, "console:short", 10)
        await write_history(data, "console:long", long_history)
        async with Host(HostConfig(data_dir=data), [ChatKeys()]) as host, anyio.create_task_group() as tg:
            short = await host.session("console:short", owner="owner")
            long = await host.session("console:long", owner="owner")
            for _ in range(5):  # warm up
                await host.handle(short, message("hello"), ui)
            tg.start_soon(probe.run)
            steps: dict[str, list[float]] = {}
            collections: list[float] = []
            with timed_steps(steps, collections):
                ours, theirs = await alternating_turns(host, (long, short), turns)
            probe.running = False
            lengths = len(long.history), len(short.history)
            # Playa's own part of a turn: appending it to the history file.
            appends: dict[str, list[float]] = {"long": [], "short": []}
            append_probe = LagProbe()
            tg.start_soon(append_probe.run)
            for n in range(turns):
                for name, session in (("long", long), ("short", short)):
                    began = anyio.current_time()
                    await session.history.extend(
                        [ModelRequest.user_text_prompt(f"q{n}"), ModelResponse(parts=[TextPart(f"a{n}")])]
                    )
                    appends[name].append(anyio.current_time() - began)
            append_probe.running = False
    a, b = Spread.of(ours), Spread.of(theirs)
    ratio = a.median / b.median
    report.add(
        "turn, median (p25–p75)",
        a.text(),
        b.text(),
        f"{ratio:.2f}×",
        f"≤ {TARGET_HISTORY_RATIO:.2f}×",
        verdict(ratio <= TARGET_HISTORY_RATIO),
    )
    longest = {name: max(times) for name, times in steps.items()}
    own = max(longest.values())
    report.add(
        "Playa's longest synchronous step in a turn",
        f"{own * 1e3:.2f} ms ("
        + ", ".join(f"{name} {value * 1e3:.2f}" for name, value in sorted(longest.items()))
        + ")",
        target=f"≤ {TARGET_LAG * 1e3:.0f} ms",
        verdict=verdict(own <= TARGET_LAG),
    )
    lag = Spread.of(probe.lags)
    report.add(
        "  garbage collections during the turns",
        f"{len(collections)}, longest {max(collections, default=0.0) * 1e3:.2f} ms (taken out of the steps)",
    )
    report.add(
        "event-loop lag during the turns, max (all work on the loop)", f"{max(probe.lags) * 1e3:.2f} ms"
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
    append_worst = max(append_probe.lags)
    report.add(
        "event-loop lag during history appends, max",
        f"{append_worst * 1e3:.2f} ms",
        target=f"≤ {TARGET_LAG * 1e3:.0f} ms",
        verdict=verdict(append_worst <= TARGET_LAG),
    )
    report.notes.append(
        f"baseline column: the same turn with 10 turns of history; messages held {lengths[0]} vs "
        f"{lengths[1]}; data dir on {ROOT} (fsync per turn); the loop-lag probe includes the "
        "offline model's and pydantic-ai's own work, which runs on the loop"
    )
    report.chart = {"3,000 turns": a, "10 turns": b}
    return report


async def run_shutdown(quick: bool) -> Report:
    chats = 200 if quick else 2000
    close_timeout = 2.0
    report = Report("shutdown", f"6. Shutdown of {chats} chats with an open connection each")
    settings = RemoteMcpSettings(
        connection=ConnectionSettings(close_timeout=close_timeout, max_concurrent_connects=64)
    )
    async with bench_server() as served:
        with disk_dir() as data:
            scopes = [f"console:c{n}" for n in range(chats)]
            for scope in scopes:
                write_servers(data, scope, [entry("a", served.url, token_of(scope))])
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
    bound = close_timeout + 1.0
    report.add(
        "host exit",
        f"{took:.2f} s",
        target=f"≤ {bound:.1f} s (close timeout + 1 s)",
        verdict=verdict(took <= bound and connected == chats),
    )
    report.notes.append(f"{connected} of {chats} connections open at shutdown")
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
        with disk_dir() as data:
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
