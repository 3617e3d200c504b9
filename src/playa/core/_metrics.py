"""The process's counters for operators: turns, and tool calls and their errors by server name.

Counted where they happen (the agent's turns, the extension's calls) with a dict increment: no
lock, since every count is made on the event loop. Read by ``/metrics``
(``exposition``) in Prometheus's text format 0.0.4.

A server's name is its owner's choice: names are counted per name across chats (never per chat,
which would tell who uses what), at most ``MAX_SERVERS`` of them; the rest are counted under
``OTHER``, a label value no server name can be (names are ``[a-z][a-z0-9-]*``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MAX_SERVERS", "OTHER", "Gauge", "Metrics", "exposition", "process_metrics"]

MAX_SERVERS: Final = 1000
"""Distinct server names counted each on their own; a scrape stays small with any number of chats."""
OTHER: Final = "(other)"


@dataclass(eq=False)
class Metrics:
    """Counters since the process started."""

    turns: int = 0
    lease_moves: int = 0
    """Chats this process took over from a process whose lease had expired (presumed dead)."""
    tool_calls: dict[str, int] = field(default_factory=dict)
    tool_errors: dict[str, int] = field(default_factory=dict)

    def turn(self) -> None:
        """A turn of a chat's agent ended (with a reply or an error)."""
        self.turns += 1

    def tool_call(self, server: str, *, failed: bool) -> None:
        """A call to a tool of ``server`` ended; ``failed``: the server failed it or it timed out."""
        calls = self.tool_calls
        if server not in calls and len(calls) >= MAX_SERVERS:
            server = OTHER
        calls[server] = calls.get(server, 0) + 1
        if failed:
            self.tool_errors[server] = self.tool_errors.get(server, 0) + 1


_METRICS = Metrics()


def process_metrics() -> Metrics:
    """The process's counters."""
    return _METRICS


@dataclass(frozen=True)
class Gauge:
    """A value read at each scrape (chats held, replies waiting): its name, help and reader."""

    name: str
    help: str
    read: Callable[[], int]


def _label(value: str) -> str:
    # The format's escapes for a label value: backslash, double quote and line feed.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _by_server(
    name: str, help_text: str, counts: dict[str, int], redact: Callable[[str], str]
) -> Iterable[str]:
    merged: dict[str, int] = {}
    for server, count in counts.items():
        # Names never hold a secret (a key-shaped name is refused), but they leave the process
        # here: through the log gate all the same. Two names redacted alike are one series.
        label = redact(server)
        merged[label] = merged.get(label, 0) + count
    yield f"# HELP {name} {help_text}"
    yield f"# TYPE {name} counter"
    for label in sorted(merged):
        yield f'{name}{{server="{_label(label)}"}} {merged[label]}'


def exposition(counters: Metrics, gauges: Iterable[Gauge] = (), *, redact: Callable[[str], str] = str) -> str:
    """The counters and ``gauges`` in Prometheus's text format 0.0.4 (ends with a line feed)."""
    lines: list[str] = []
    for gauge in gauges:
        lines += [
            f"# HELP {gauge.name} {gauge.help}",
            f"# TYPE {gauge.name} gauge",
            f"{gauge.name} {gauge.read()}",
        ]
    lines += [
        "# HELP playa_turns_total Turns of the chats' agents since the process started.",
        "# TYPE playa_turns_total counter",
        f"playa_turns_total {counters.turns}",
        "# HELP playa_lease_moves_total Chats taken over from a process whose lease had expired.",
        "# TYPE playa_lease_moves_total counter",
        f"playa_lease_moves_total {counters.lease_moves}",
    ]
    # Copies: a scrape reads while calls go on (on the same loop, but cheaply safe).
    lines += _by_server(
        "playa_tool_calls_total", "Tool calls by server name.", dict(counters.tool_calls), redact
    )
    lines += _by_server(
        "playa_tool_errors_total",
        "Tool calls that failed or timed out, by server name.",
        dict(counters.tool_errors),
        redact,
    )
    return "\n".join(lines) + "\n"
