"""Draws the benchmarks' chart (a PNG) with matplotlib, when it is installed.

matplotlib is not a dependency of Playa: ``.venv/bin/pip install matplotlib`` to draw the chart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench._common import Report, Spread


def _bars(
    ax: Any,
    title: str,
    unit: str,
    values: dict[str, Spread | float],
    scale: float = 1.0,
    target: float | None = None,
) -> None:
    labels = list(values)
    medians: list[float] = []
    low: list[float] = []
    high: list[float] = []
    for label in labels:
        value = values[label]
        if isinstance(value, Spread):
            medians.append(value.median * scale)
            low.append((value.median - value.p25) * scale)
            high.append((value.p75 - value.median) * scale)
        else:
            medians.append(value * scale)
            low.append(0.0)
            high.append(0.0)
    colors = [
        "#1f77b4" if label.startswith("Playa") or label == "Redactor" else "#aaaaaa" for label in labels
    ]
    ax.barh(labels, medians, xerr=[low, high], color=colors, capsize=3)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(unit)
    for index, median in enumerate(medians):
        ax.text(median + high[index], index, f"  {median:.3g}", va="center", fontsize=8)
    if target is not None:
        ax.axvline(target, color="#d62728", linestyle="--", linewidth=1, label=f"target {target:g} {unit}")
        ax.legend(loc="best", fontsize=8)
    ax.margins(x=0.15)


def draw(reports: list[Report], facts: dict[str, str], path: Path) -> None:
    """Draw what the reports hold: calls, connect, memory and redaction, medians with p25–p75."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_name = {report.name: report for report in reports}
    panels: list[tuple[str, str, dict[str, Any], float, float | None]] = []
    if "calls" in by_name:
        panels.append(("1. Tool call (lower is better)", "ms", by_name["calls"].chart, 1e3, None))
    if "connect" in by_name:
        chart = by_name["connect"].chart
        title = "2. Connect + tools/list; no handshake unless the bar names one (lower is better)"
        panels.append((title, "ms", chart["connect"], 1e3, None))
        panels.append(
            ("2. Memory per open connection (lower is better)", "kB", chart["memory_kb"], 1.0, 150.0)
        )
    if "redact" in by_name:
        targets = {"ascii": 300.0, "non-ascii": 150.0}
        for label, values in by_name["redact"].chart.items():
            title = f"5. Redaction, {label} text (higher is better)"
            panels.append((title, "MB/s", values, 1.0, targets.get(label)))
    if not panels:
        return
    figure, axes = plt.subplots(len(panels), 1, figsize=(8, 1.9 * len(panels) + 0.6))
    axes = axes if len(panels) > 1 else [axes]
    for ax, (title, unit, values, scale, target) in zip(axes, panels, strict=True):
        _bars(ax, title, unit, values, scale, target)
    figure.suptitle(
        f"Playa vs the bare mcp SDK {facts['mcp']} — {facts['nproc']} cores, Python {facts['python']}",
        fontsize=11,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
