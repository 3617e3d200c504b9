"""The process's counters and their Prometheus text: escaped, redacted, bounded in size."""

from __future__ import annotations

from playa.core import Gauge, Metrics, exposition
from playa.core._metrics import MAX_SERVERS, OTHER
from support.prometheus import parse_exposition


def test_calls_and_errors_are_counted_by_server_name_and_turns_in_all() -> None:
    counters = Metrics()
    counters.turn()
    counters.tool_call("docs", failed=False)
    counters.tool_call("docs", failed=True)
    counters.tool_call("wiki", failed=False)
    counters.lease_moves += 2
    held = Gauge("playa_chats_held", "Chats held.", lambda: 3)

    samples, types = parse_exposition(exposition(counters, [held]))

    assert samples == {
        ("playa_chats_held", frozenset()): 3,
        ("playa_turns_total", frozenset()): 1,
        ("playa_lease_moves_total", frozenset()): 2,
        ("playa_tool_calls_total", frozenset({("server", "docs")})): 2,
        ("playa_tool_calls_total", frozenset({("server", "wiki")})): 1,
        ("playa_tool_errors_total", frozenset({("server", "docs")})): 1,
    }
    assert types["playa_tool_errors_total"] == "counter"


def test_a_label_value_is_escaped_so_no_name_can_add_a_line_or_a_label() -> None:
    counters = Metrics()
    hostile = 'a"} 99\nplaya_turns_total 1000\\'
    counters.tool_call(hostile, failed=True)

    text = exposition(counters)
    samples, _ = parse_exposition(text)

    assert samples[("playa_tool_calls_total", frozenset({("server", hostile)}))] == 1
    assert samples[("playa_turns_total", frozenset())] == 0
    assert len(text.splitlines()) == 12


def test_names_pass_the_redactor_and_names_redacted_alike_are_one_series() -> None:
    counters = Metrics()
    counters.tool_call("alpha-sk1", failed=False)
    counters.tool_call("beta-sk1", failed=True)
    counters.tool_call("gamma", failed=False)

    text = exposition(counters, redact=lambda name: "[redacted]" if "sk1" in name else name)
    samples, _ = parse_exposition(text)

    assert "sk1" not in text
    assert samples[("playa_tool_calls_total", frozenset({("server", "[redacted]")}))] == 2
    assert samples[("playa_tool_errors_total", frozenset({("server", "[redacted]")}))] == 1
    assert samples[("playa_tool_calls_total", frozenset({("server", "gamma")}))] == 1


def test_past_the_bound_new_server_names_are_counted_together() -> None:
    counters = Metrics()
    for index in range(MAX_SERVERS + 5):
        counters.tool_call(f"s{index}", failed=index % 2 == 0)
    counters.tool_call("s0", failed=False)  # a name already counted keeps its own series

    samples, _ = parse_exposition(exposition(counters))

    calls = {
        dict(labels)["server"]: v for (name, labels), v in samples.items() if name == "playa_tool_calls_total"
    }
    assert len(calls) == MAX_SERVERS + 1
    assert calls[OTHER] == 5 and calls["s0"] == 2
    assert samples[("playa_tool_errors_total", frozenset({("server", OTHER)}))] == 3
