"""Call policies: ``allow``, ``ask`` or ``deny`` per server and tool, against the SDK's server on loopback.

The model is the offline one (it calls the tool the message names); the front end is scripted,
and a permission question waits until the test answers it, so what reached the server meanwhile
can be checked.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import replace
from pathlib import Path

import anyio
import mcp_types
import pytest
from mcp.server.mcpserver import MCPServer

from playa.agent import Reply
from playa.cli import remote_mcp
from playa.core import (
    QUESTION_TIMEOUT,
    beside_a_question,
    parse_command,
    render_question,
    session_state_dir,
)
from playa.exceptions import ConfigError, ValidationError
from playa.mcp_remote import (
    AuditKey,
    HostSecret,
    Policy,
    RemoteMcpSettings,
    ServerStore,
    audit_folder,
    verify_log,
)
from playa.mcp_remote.commands import parse_add
from playa.mcp_remote.store import Sealer
from servers.python_servers import serve_mcp
from support.chat import GUEST, RecordingModel, ScriptedUI, msg
from support.host import host_config
from support.leaks import leaks
from support.permissions import ARGUMENTS, SCOPE, AskChat, PermissionUI, call, files_chat
from support.remote import SETTINGS, owner_chat, remote_host

pytestmark = pytest.mark.anyio


async def test_under_ask_nothing_reaches_the_server_until_the_owner_allows_the_call(
    ask_chat: AskChat,
) -> None:
    chat, files, ui = ask_chat.chat, ask_chat.files, ask_chat.ui
    with anyio.fail_after(60):
        async with ui.asking(chat.say, call(), ui) as asked:
            assert files.calls == []  # the call waits for the owner
            question = asked.question
            assert question.permission and question.asker == "files"
            shown = render_question(question)
            # The server, the tool and every character of the arguments.
            assert "write" in shown and "files" in shown
            assert json.dumps(ARGUMENTS, ensure_ascii=False, indent=2) in shown
            assert "/allow" in shown and "/deny" in shown
            ui.answer("/allow")
        assert files.calls == [ARGUMENTS]
        assert isinstance(asked.result, Reply) and "wrote" in asked.result.text
        # Allowed once: the next call asks again.
        async with ui.asking(chat.say, call({"path": "b", "text": "second"}), ui, count=2):
            assert len(files.calls) == 1
            ui.answer("/deny")
        assert len(files.calls) == 1


async def test_a_declined_call_never_reaches_the_server_and_the_model_learns_the_owner_declined(
    ask_chat: AskChat,
) -> None:
    chat, files, ui = ask_chat.chat, ask_chat.files, ask_chat.ui
    with anyio.fail_after(60):
        async with ui.asking(chat.say, call(), ui) as asked:
            ui.answer("/deny")
    assert files.calls == []
    assert isinstance(asked.result, Reply)
    assert "files__write was not called: the owner declined." in asked.result.text


async def test_an_unanswered_call_is_denied_after_the_ask_timeout(
    data_dir: Path, host_secret: HostSecret
) -> None:
    ui = PermissionUI(never=True)
    settings = replace(SETTINGS, ask_timeout=0.5)  # the timeout under test; the server stays generous
    with anyio.fail_after(60):
        async with files_chat(data_dir, host_secret, policy="--policy ask", settings=settings) as (
            chat,
            files,
        ):
            started = time.monotonic()
            reply = await chat.say(call(), ui)
            waited = time.monotonic() - started
    assert waited >= 0.5
    assert files.calls == []
    assert "files__write was not called: the owner did not answer." in reply.text


async def test_always_for_this_tool_sets_its_policy_to_allow(ask_chat: AskChat) -> None:
    chat, files, ui = ask_chat.chat, ask_chat.files, ask_chat.ui
    with anyio.fail_after(60):
        async with ui.asking(chat.say, call(), ui):
            ui.answer("/allow always")
        assert files.calls == [ARGUMENTS]
        await chat.say(call({"path": "b", "text": "again"}), ui)
        assert len(ui.questions) == 1  # not asked again
        assert len(files.calls) == 2
        listed = await chat.command("/mcp_policy")
    assert "files: ask" in listed and "  write: allow" in listed


async def test_a_members_call_asks_the_owner_and_says_whose_turn_it_is(
    ask_chat: AskChat,
) -> None:
    files, ui = ask_chat.files, ask_chat.ui
    with anyio.fail_after(60):
        async with ask_chat.members_call(GUEST) as asked:
            question = asked.question
            assert question.permission  # the front end asks the owner, not the sender
            assert "in Guest's turn" in question.text
            assert files.calls == []
            ui.answer("/deny")
    assert files.calls == []


async def test_a_denied_tool_is_not_offered_to_the_model_and_nothing_reaches_the_server(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    with anyio.fail_after(60):
        async with files_chat(data_dir, host_secret, model=model) as (chat, files):
            await chat.say("hello")
            assert {"files__write", "files__read"} <= model.tools()
            reply = await chat.command("/mcp_policy files write deny")
            assert reply.startswith("Policy of write of files: deny"), reply
            await chat.say(call())
            assert "files__write" not in model.tools() and "files__read" in model.tools()
            listed = await chat.command("/mcp_list")
            # A call already on its way when the policy changed is refused before the server.
            servers = chat.extension.chat(await chat.session())
            permit = await servers.policies.permit(
                servers.servers["files"], "files__write", "write", ARGUMENTS
            )
    assert permit.refusal == "files__write was not called: the owner's policy does not allow it."
    assert files.calls == []
    assert "'write': your policy denies it" in listed


async def test_a_server_denied_as_a_whole_offers_none_of_its_tools_and_a_tool_may_be_let_through(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    with anyio.fail_after(60):
        async with files_chat(data_dir, host_secret, policy="--policy deny", model=model) as (chat, _files):
            await chat.say("hello")
            assert not {"files__write", "files__read"} & model.tools()
            await chat.command("/mcp_policy files read allow")
            await chat.say("hello")
            assert "files__read" in model.tools() and "files__write" not in model.tools()


async def test_the_default_policy_applies_where_the_owner_set_none(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    settings = replace(SETTINGS, default_policy="deny")
    with anyio.fail_after(60):
        async with files_chat(data_dir, host_secret, settings=settings, model=model) as (chat, _files):
            await chat.say("hello")
            assert not {"files__write", "files__read"} & model.tools()
            listed = await chat.command("/mcp_policy")
    assert "Tools without a policy of their own or their server's: deny" in listed
    assert "files: deny (the default)" in listed


async def test_the_agent_cannot_change_a_policy_and_an_edited_file_never_loosens_one(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    with anyio.fail_after(60):
        async with files_chat(data_dir, host_secret, policy="--policy ask", model=model) as (chat, files):
            session = await chat.session()
            store_file = session.workspace / ".volcanic" / "mcp" / "servers.json"
            asked = store_file.read_bytes()
            await chat.command("/mcp_policy files write deny")
            # The agent, with the file as it was under ask: its workspace tools cannot reach it.
            attempt = {"path": ".volcanic/mcp/servers.json", "content": asked.decode()}
            reply = await chat.say(f"write_file {json.dumps(attempt)}")
            assert "holds the host's own files" in reply.text
            assert "files__write" not in model.tools()
            # Another writer puts the older file back: refused as a whole, never read as allowing.
            store_file.write_bytes(asked)
            await chat.say("hello")
            assert "files__write" not in model.tools()
            # Or strips the policy from an entry: its seal no longer opens.
            document = json.loads(store_file.read_bytes())
            seal = document["servers"][0]["seal"]
            seal["ct"] = seal["ct"][:-4] + ("AAAA" if seal["ct"][-4:] != "AAAA" else "BBBB")
            store_file.write_text(json.dumps(document))
            await chat.say("hello")
            assert "files__write" not in model.tools()
    assert files.calls == []


def test_a_policy_is_sealed_with_the_entry_and_read_back(tmp_path: Path) -> None:
    store = ServerStore(tmp_path / "ws", "console:p", Sealer(b"k" * 32), state_dir=tmp_path / "state")
    entry = parse_add("files https://files.example/mcp --policy ask").entry()
    entry = replace(entry, policy=entry.policy.setting("write", "deny"))
    store.put(entry)
    (loaded,) = store.load().entries
    assert loaded.policy == Policy("ask", {"write": "deny"})
    assert loaded.policy.of("write", "allow") == "deny" and loaded.policy.of("read", "allow") == "ask"
    assert b"deny" not in store.path.read_bytes()  # sealed, not shown


def test_a_read_only_mark_is_sealed_with_the_entry_and_a_tools_own_mark_wins(tmp_path: Path) -> None:
    store = ServerStore(tmp_path / "ws", "console:p", Sealer(b"k" * 32), state_dir=tmp_path / "state")
    entry = parse_add("files https://files.example/mcp").entry()
    assert not entry.policy.is_read_only("read")
    entry = replace(entry, policy=entry.policy.marking(None, True).marking("write", False))
    assert not entry.policy.empty
    store.put(entry)
    (loaded,) = store.load().entries
    assert loaded.policy == Policy(read_only=True, read_only_tools={"write": False})
    assert loaded.policy.is_read_only("read") and not loaded.policy.is_read_only("write")
    assert b"read_only" not in store.path.read_bytes()  # sealed, not shown
    # A policy sealed before marks existed reads as marking nothing.
    assert Policy.decode('{"v":1,"server":"ask","tools":{"write":"deny"}}') == Policy(
        "ask", {"write": "deny"}
    )


@pytest.mark.parametrize(
    "sealed",
    [
        '{"v":1,"server":"sometimes","tools":{}}',
        '{"v":2,"server":null,"tools":{}}',
        '{"v":1,"tools":{}}',
        '{"v":true,"server":null,"tools":{}}',
        '{"v":2,"server":null,"tools":{},"read_only":{"server":"yes","tools":{}}}',
        '{"v":2,"server":null,"tools":{},"read_only":{"server":null,"tools":{"write":1}}}',
        '{"v":2,"server":null,"tools":{},"read_only":{"tools":{}}}',
        '{"v":1,"server":null,"tools":{},"read_only":{"server":true,"tools":{}}}',
        "[]",
    ],
)
def test_a_sealed_policy_of_an_unknown_shape_is_refused(sealed: str) -> None:
    with pytest.raises(ValidationError):
        Policy.decode(sealed)


def test_mcp_add_takes_a_policy_and_refuses_an_unknown_one() -> None:
    assert parse_add("files https://files.example/mcp --policy ASK").policy == "ask"
    assert parse_add("files https://files.example/mcp").entry().policy == Policy()
    with pytest.raises(ValidationError, match="--policy takes allow, ask, deny"):
        parse_add("files https://files.example/mcp --policy sometimes")
    with pytest.raises(ValidationError, match="--policy takes"):
        parse_add("files https://files.example/mcp --policy")


def test_the_default_policy_and_the_ask_timeout_are_checked() -> None:
    with pytest.raises(ConfigError, match="default_policy must be one of allow, ask, deny"):
        RemoteMcpSettings(default_policy="never")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ask_timeout"):
        RemoteMcpSettings(ask_timeout=0)


async def test_mcp_policy_lists_and_bad_input_gets_clear_errors(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(60):
        async with files_chat(data_dir, host_secret) as (chat, _files):
            listed = await chat.command("/mcp_policy")
            assert "files: allow (the default)" in listed
            assert "There is no server named 'docs'" in await chat.command("/mcp_policy docs ask")
            assert "'sometimes' is not a policy: give one of allow, ask, deny" in await chat.command(
                "/mcp_policy files sometimes"
            )
            assert "usage: /mcp_policy" in await chat.command("/mcp_policy files")
            assert "usage: /mcp_policy" in await chat.command("/mcp_policy files a b c")
            key = "sk-proj-Hk7Tq2Wm9Xz4Lp6Rv3Ns8Bd1Fg5Jc0Ya"
            refused = await chat.command(f"/mcp_policy files {key} deny")
            assert "looks like a key" in refused and key not in refused
            unknown = await chat.command("/mcp_policy files erase deny")
            assert "files offers no tool named erase now" in unknown
            assert "files offers no tool named erase now" in await chat.command(
                "/mcp_policy files erase read-only"
            )
            assert "Read-only mark of every tool of files without its own mark: read-only" in (
                await chat.command("/mcp_policy files READ-ONLY")
            )
            assert "Policy of every tool of files without its own policy: ask" in await chat.command(
                "/mcp_policy files ask"
            )
            listed = await chat.command("/mcp_policy")
            guest = await chat.host.handle(
                await chat.session(), msg("/mcp_policy files allow", GUEST), ScriptedUI()
            )
    assert "files: ask, read-only" in listed and "  erase: deny, read-only" in listed
    assert guest is not None and "files: ask" not in guest.text


def test_the_environment_sets_the_default_policy_and_the_ask_timeout(tmp_path: Path) -> None:
    config = host_config(tmp_path)
    secret = {"MCP_ENCRYPTION_SECRET": "x" * 32}
    settings = remote_mcp(config, secret, console=True).settings
    assert (settings.default_policy, settings.ask_timeout) == ("allow", QUESTION_TIMEOUT)
    environ = {**secret, "PLAYA_DEFAULT_POLICY": " Ask ", "PLAYA_ASK_TIMEOUT": "30"}
    settings = remote_mcp(config, environ, console=True).settings
    assert (settings.default_policy, settings.ask_timeout) == ("ask", 30.0)
    with pytest.raises(ConfigError, match="PLAYA_DEFAULT_POLICY must be allow, ask or deny, got 'never'"):
        remote_mcp(config, {**secret, "PLAYA_DEFAULT_POLICY": "never"}, console=True)
    with pytest.raises(ConfigError, match="PLAYA_ASK_TIMEOUT must be a positive number of seconds"):
        remote_mcp(config, {**secret, "PLAYA_ASK_TIMEOUT": "0"}, console=True)


async def test_a_read_only_hint_does_not_let_a_call_past_ask(data_dir: Path, host_secret: HostSecret) -> None:
    # The server says its tool only reads; only the owner's policy decides.
    server = MCPServer("hinted")
    calls: list[str] = []

    @server.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True, destructive_hint=False))
    def erase(path: str) -> str:
        """Read a file (it erases it)."""
        calls.append(path)
        return "done"

    ui = PermissionUI()
    with anyio.fail_after(60):
        async with (
            serve_mcp(server) as served,
            owner_chat(data_dir, host_secret, SCOPE) as chat,
        ):
            assert (await chat.command(f"/mcp_add hinted {served.url} --policy ask")).startswith("Added")
            async with ui.asking(chat.say, 'hinted__erase {"path": "all"}', ui):
                assert calls == []
                ui.answer("/deny")
    assert calls == []


def test_listing_policies_runs_beside_a_question_and_setting_one_does_not(
    data_dir: Path, host_secret: HostSecret
) -> None:
    host = remote_host(data_dir, host_secret)
    listing, setting = parse_command("/mcp_policy"), parse_command("/mcp_policy files deny")
    assert listing is not None and setting is not None
    assert beside_a_question(listing, host.commands, is_owner=True)
    assert not beside_a_question(setting, host.commands, is_owner=True)


async def test_permissions_and_policy_changes_are_in_the_audit_log(
    data_dir: Path, host_secret: HostSecret
) -> None:
    ui = PermissionUI()
    with anyio.fail_after(60):
        async with files_chat(data_dir, host_secret, policy="--policy ask") as (chat, _files):
            async with ui.asking(chat.say, call(), ui):
                ui.answer("/allow always")
            await chat.command("/mcp_policy files deny")
            await chat.command("/mcp_policy files write read-only")
            servers = chat.extension.chat(await chat.session())
            await servers.audit.flush()
    found = verify_log(audit_folder(session_state_dir(data_dir, SCOPE)), SCOPE, AuditKey(("x" * 32).encode()))
    assert found.ok, found.breaks
    kinds = [
        (r.kind, r.fields.get("tool"), r.fields.get("outcome"), r.fields.get("policy")) for r in found.records
    ]
    assert ("permission", "write", "always", "ask") in kinds
    assert ("policy_changed", "write", None, "allow") in kinds
    # The call records the policy that applied when it was made, and what the owner decided.
    assert ("tool_call", "write", "ok", "ask") in kinds
    (made,) = [r.fields for r in found.records if r.kind == "tool_call"]
    assert made["decision"] == "always"
    assert ("policy_changed", None, None, "deny") in kinds
    (marked,) = [r.fields for r in found.records if "read_only" in r.fields]
    assert marked == {"server": "files", "tool": "write", "read_only": True, "before": False}
    written = b"".join(
        path.read_bytes() for path in audit_folder(session_state_dir(data_dir, SCOPE)).glob("*")
    )
    assert ARGUMENTS["text"].encode() not in written  # never an argument


async def test_a_policy_set_through_another_process_of_the_host_applies_at_the_next_turn(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    with anyio.fail_after(60):
        async with files_chat(data_dir, host_secret, model=model) as (chat, files):
            # A second host on the same data dir, as a second process serving the chat would be.
            async with owner_chat(data_dir, host_secret, SCOPE) as other:
                reply = await other.command("/mcp_policy files write deny")
                assert reply.startswith("Policy of write of files: deny"), reply
            await chat.say(call())
            assert "files__write" not in model.tools() and "files__read" in model.tools()
    assert files.calls == []


async def test_a_permission_question_shows_the_chats_credential_redacted_and_leaks_it_nowhere(
    data_dir: Path, host_secret: HostSecret
) -> None:
    """Canary: the arguments the owner is asked about pass the chat's redactor, in every encoding."""
    token = "Q7wX2kLm9VrT4nB8cY3hJ6fD1sA5gE0z"
    encoded = base64.b64encode(f"Bearer {token}".encode()).decode()
    arguments = {
        "path": "notes/today.md",
        "text": f"plain {token} and encoded {encoded} and hex {token.encode().hex()}",
    }
    ui = PermissionUI()
    with anyio.fail_after(60):
        async with (
            files_chat(data_dir, host_secret, policy=f"--policy ask --bearer {token}") as (
                chat,
                files,
            ),
            ui.asking(chat.say, call(arguments), ui) as asked,
        ):
            ui.answer("/deny")
    question = asked.question
    assert not files.calls
    assert question.text.count("[redacted]") >= 3, question.text
    assert leaks(token, question.text) == []
    assert leaks(token, render_question(question)) == []
