"""Runs the benchmarks and prints a table: ``python -m bench [--quick] [--only NAME ...]``.

Each benchmark runs in a fresh process of its own, as its baselines do: none inherits what
another left in the heap (10,000 closed chats, 40 MB texts, a collector's older generations)
or depends on where it comes in the run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from bench._common import Report, Spread, machine, raise_fd_limit, verdict
from bench._run import BENCHMARKS, measure
from playa._runtime import HEAP_KEPT_FREE, HEAP_LARGEST, tune_runtime


def print_report(report: Report) -> None:
    print(f"\n{report.title}")
    rows = [("", "Playa", "baseline", "ratio", "target", "")]
    rows += [(f.what, f.ours, f.theirs, f.ratio, f.target, f.verdict) for f in report.figures]
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    for number, row in enumerate(rows):
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if number == 0:
            print("  " + "  ".join("-" * width for width in widths))
    for note in report.notes:
        print(f"  note: {note}")


def _jsonable(value: object) -> object:
    if isinstance(value, Spread):
        return asdict(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run in under a minute")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(BENCHMARKS),
        metavar="NAME",
        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--chart", type=Path, metavar="PATH", help="also draw a PNG chart (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.chart and importlib.util.find_spec("matplotlib") is None:
        # Said before the run, not after it: a full run takes minutes.
        parser.error(
            "--chart needs matplotlib, which Playa does not depend on: .venv/bin/pip install matplotlib"
        )
    # Each table shows as soon as it is measured, also when the output goes to a file.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    limit = raise_fd_limit()
    # What each benchmark's process applies (see bench._run.measure), for the machine line.
    tuned = tune_runtime()
    facts = machine()
    facts["malloc"] = (
        f"glibc, blocks up to {HEAP_LARGEST >> 20} MiB from the heap, {HEAP_KEPT_FREE >> 20} MiB kept free"
        if tuned
        else "the C library's defaults"
    )
    started = datetime.now(UTC)
    print(f"Playa benchmarks, {started:%Y-%m-%d %H:%M} UTC{' (quick)' if args.quick else ''}")
    print("  " + ", ".join(f"{k} {v}" for k, v in facts.items()) + f", open files {limit}")
    reports: list[Report] = []
    for name in args.only or list(BENCHMARKS):
        began = time.perf_counter()
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as process:
            try:
                report = process.submit(measure, name, args.quick).result()
            except Exception as exc:  # boundary: one broken benchmark is reported, the rest still run
                report = Report(name, f"{name}: the benchmark failed")
                report.add("ran to its end", f"{type(exc).__name__}: {exc}"[:200], verdict=verdict(False))
        report.notes.append(f"took {time.perf_counter() - began:.1f} s")
        print_report(report)
        reports.append(report)
    verdicts = [(r.name, f.what, f.verdict) for r in reports for f in r.figures if f.verdict]
    missed = [v for v in verdicts if v[2] == "MISS"]
    print(f"\n{len(verdicts) - len(missed)} of {len(verdicts)} targets met")
    for name, what, _ in missed:
        print(f"  MISS {name}: {what}")
    if args.json:
        data = {
            "date": started.isoformat(timespec="seconds"),
            "quick": args.quick,
            "machine": facts,
            "reports": [
                {
                    "name": r.name,
                    "title": r.title,
                    "figures": [asdict(f) for f in r.figures],
                    "notes": r.notes,
                    "chart": _jsonable(r.chart),
                }
                for r in reports
            ],
        }
        args.json.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    if args.chart:
        from bench._chart import draw

        draw(reports, facts, args.chart)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
