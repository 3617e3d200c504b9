"""The benchmarks by name, and how one runs in the fresh process ``python -m bench`` gives it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Awaitable, Callable

import anyio

from bench._common import Report, raise_fd_limit
from playa._runtime import tune_runtime

__all__ = ["BENCHMARKS", "measure"]

# name: (module, function); imported in the process that runs it.
BENCHMARKS: dict[str, tuple[str, str]] = {
    "calls": ("bench.bench_calls", "run"),
    "connect": ("bench.bench_connect", "run"),
    "before-turn": ("bench.bench_turns", "run_before_turn"),
    "dead-server": ("bench.bench_turns", "run_dead_server"),
    "redact": ("bench.bench_redact", "run"),
    "scale": ("bench.bench_scale", "run"),
    "history": ("bench.bench_life", "run_history"),
    "shutdown": ("bench.bench_life", "run_shutdown"),
    "memory": ("bench.bench_life", "run_memory"),
    "model": ("bench.bench_model", "run"),
    "audit": ("bench.bench_audit", "run"),
    "flow": ("bench.bench_flow", "run"),
    "db": ("bench.bench_db", "run"),
    "db-turn": ("bench.bench_db_turn", "run"),
    "stream": ("bench.bench_stream", "run"),
    "failover": ("bench.bench_failover", "run"),
    "spread": ("bench.bench_spread", "run"),
}


def _benchmark(name: str) -> Callable[[bool], Awaitable[Report]]:
    module, function = BENCHMARKS[name]
    run: Callable[[bool], Awaitable[Report]] = getattr(importlib.import_module(module), function)
    return run


def measure(name: str, quick: bool) -> Report:
    """Run one benchmark in this process, with the settings of the `playa` command's process."""
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    raise_fd_limit()
    # The `playa` command's collector and allocator settings, for Playa and its baselines alike.
    tune_runtime()
    return anyio.run(_benchmark(name), quick)
