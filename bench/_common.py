"""What every benchmark shares: spreads, report rows, the server process, limits and memory."""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import resource
import ssl
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

LOOPBACK = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
Verdict = Literal["PASS", "MISS", ""]


@dataclass(frozen=True)
class Spread:
    """The median and interquartile range of a sample."""

    median: float
    p25: float
    p75: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if len(values) == 1:
            return cls(values[0], values[0], values[0], 1)
        q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(q2, q1, q3, len(values))

    def text(self, scale: float = 1e3, unit: str = "ms", digits: int = 2) -> str:
        return (
            f"{self.median * scale:.{digits}f} {unit} "
            f"({self.p25 * scale:.{digits}f}–{self.p75 * scale:.{digits}f}, n={self.n})"
        )


@dataclass(frozen=True)
class Figure:
    """One row of the table: what was measured, for Playa and its baseline, and the verdict."""

    what: str
    ours: str
    theirs: str = ""
    ratio: str = ""
    target: str = ""
    verdict: Verdict = ""


@dataclass
class Report:
    """One benchmark's outcome: its rows, notes for the reader, and raw numbers for the chart."""

    name: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    chart: dict[str, Any] = field(default_factory=dict)

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.figures.append(Figure(*args, **kwargs))

    @property
    def verdicts(self) -> list[Verdict]:
        return [f.verdict for f in self.figures if f.verdict]


def verdict(ok: bool) -> Verdict:
    return "PASS" if ok else "MISS"


async def timed_calls(
    call: Callable[[], Awaitable[object]],
    count: int,
    into: list[float],
    settle: Callable[[], Awaitable[object]] | None = None,
) -> float:
    """Run ``call`` ``count`` times, append each wall time to ``into``; return the CPU seconds
    spent, with ``settle``'s: the work the calls left to do later (an audit batch), done now."""
    cpu = time.process_time()
    for _ in range(count):
        started = anyio.current_time()
        await call()
        into.append(anyio.current_time() - started)
    if settle is not None:
        await settle()
    return time.process_time() - cpu


async def alternating_blocks(
    sides: Sequence[tuple[str, Callable[[], Awaitable[object]], list[float]]],
    blocks: int,
    per_block: int,
    cpu: dict[str, list[float]],
    settle: Mapping[str, Callable[[], Awaitable[object]]] | None = None,
) -> None:
    """Time ``blocks`` blocks of ``per_block`` calls of each side, the order reversed every other
    block so that neither side always runs on a warmer or cooler machine; each call's wall time
    goes to the side's list, each block's CPU seconds per call to ``cpu[name]``.

    ``settle[name]`` ends each of that side's blocks inside its clock: what its calls left to do
    later (an audit batch waiting to be written) is charged to them, not to the next side's block.
    """
    settle = settle or {}
    for block in range(blocks):
        order = list(sides) if block % 2 == 0 else list(reversed(sides))
        for name, call, into in order:
            cpu[name].append(await timed_calls(call, per_block, into, settle.get(name)) / per_block)


def reference() -> int:
    """A fixed pure-Python workload (10-30 ms here): a bytecode loop of integer arithmetic.

    Timed beside a benchmark, it shows the speed of this machine's CPU at that moment: the VM
    switches between a fast and a slow state, and is shared with other work.
    """
    total = 0
    for number in range(300_000):
        total += number * number
    return total


def cpu_seconds(function: Callable[[], object]) -> float:
    """The process CPU time ``function()`` takes."""
    started = time.process_time()
    function()
    return time.process_time() - started


def raise_fd_limit() -> int:
    """Raise the soft limit of open files to the hard limit; return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_bytes() -> int:
    """This process's resident set size now."""
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def machine() -> dict[str, str]:
    """The facts a reader needs to compare these numbers with theirs."""
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as file:
        for line in file:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "mcp": version("mcp"),
        "httpx2": version("httpx2"),
        "anyio": version("anyio"),
        "kernel": platform.release(),
        "gc thresholds": "/".join(map(str, gc.get_threshold())),
    }


@dataclass(frozen=True)
class Served:
    """The benchmark server running in its own process."""

    port: int
    process: subprocess.Popen[str]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/mcp"

    @property
    def sse_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/sse"


def child_env() -> dict[str, str]:
    """The environment of a process a benchmark starts (``python -m bench…``): this one's, with the
    repository and its ``src`` on the import path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}


@contextlib.asynccontextmanager
async def bench_server(*, json_response: bool = False, discover_ttl_ms: int = 0) -> AsyncIterator[Served]:
    """Start ``python -m bench.server`` on a free loopback port and stop it on exit."""
    args = [sys.executable, "-m", "bench.server", "--port", "0", "--discover-ttl", str(discover_ttl_ms)]
    if json_response:
        args.append("--json")
    env = child_env()
    # Popen itself does not block: the wait for the server's first line runs in a thread.
    process = subprocess.Popen(  # noqa: ASYNC220
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT, env=env
    )
    try:
        assert process.stdout is not None
        with anyio.fail_after(30):
            line = await anyio.to_thread.run_sync(process.stdout.readline)
        if not line.startswith("READY "):
            raise RuntimeError(f"the benchmark server did not start: {line!r}")
        yield Served(int(line.split()[1]), process)
    finally:
        process.terminate()
        try:
            await anyio.to_thread.run_sync(process.wait, 10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.asynccontextmanager
async def sdk_client(
    url: str, *, headers: Mapping[str, str], mode: str = "auto", verify: ssl.SSLContext | bool = True
) -> AsyncIterator[Client]:
    """The bare SDK's ``Client`` over Streamable HTTP, with the SDK's own timeouts, sending
    ``headers`` on every request: a baseline that sends what Playa sends (the server's bearer
    token), so the header's cost is the wire's, not Playa's."""
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(verify=verify, timeout=timeout, headers=dict(headers)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


@dataclass
class Blackhole:
    """A loopback server that accepts TCP connections and never answers."""

    url: str
    accepted: int = 0


@contextlib.asynccontextmanager
async def blackhole() -> AsyncIterator[Blackhole]:
    listener = await anyio.create_tcp_listener(local_host=LOOPBACK, local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    hole = Blackhole(url=f"http://{LOOPBACK}:{port}/mcp")

    async def hold(stream: anyio.abc.SocketStream) -> None:
        hole.accepted += 1
        async with stream:
            await anyio.sleep_forever()

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, hold)
        try:
            yield hole
        finally:
            tg.cancel_scope.cancel()


class GcPauses:
    """Adds up the time the garbage collector stops the world, per generation, while installed."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.counts = [0, 0, 0]
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            generation = info["generation"]
            self.seconds[generation] += time.perf_counter() - self._started
            self.counts[generation] += 1

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._callback)

    def text(self) -> str:
        return ", ".join(
            f"gen{g} {self.counts[g]}× {self.seconds[g] * 1e3:.0f} ms" for g in range(3) if self.counts[g]
        )
