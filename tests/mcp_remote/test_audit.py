"""A chat's audit log: every tamper is found by ``playa audit verify``, no record holds a secret,
the calls of a real loopback server are recorded with their outcome, and only the owner reads it.

The log is written by the chat's ``AuditLog`` (a worker thread, batched); the verifier runs as
the operator runs it, a ``playa`` process with the host secret in its environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel
from tests.telegram.fake_bot_api import FakeBotApi, creator, group_chat, private_chat, user

from playa.agent import Host, HostConfig
from playa.cli import remote_mcp
from playa.core import session_state_dir
from playa.mcp_remote import AuditKey, HostSecret, RemoteMcpExtension, audit_folder, verify_log
from playa.mcp_remote.store import AuditLog, AuditRecord, FieldValue, Sealer, ServerStore, read_records
from playa.telegram import TelegramSettings, run_telegram
from servers.oidc import authorization_server
from servers.python_servers import TaskServer, serve_asgi, serve_mcp
from support.chat import GUEST, ScriptedUI, msg
from support.oauth import SCOPE as OAUTH_SCOPE
from support.oauth import log_in, log_in_again, protected_chat, protected_server, refuse_sign_in
from support.remote import HEALTHY, SETTINGS, OwnerChat, owner_chat, remote_host

pytestmark = pytest.mark.anyio

SECRET = "x" * 32  # the conftest's host secret
SCOPE = "console:audited"
HEADER_CANARY = "Hk7Tq2Wm9Xz4Lp6Rv3Ns8Bd1Fg5Jc0Ya"
ARGUMENT_CANARY = "arg-canary-Qe4Uo8Iy2Tr6Ew0Pl3Kj"


def folder_of(data_dir: Path, scope: str) -> Path:
    return audit_folder(session_state_dir(data_dir, scope))


async def write_log(data_dir: Path, scope: str, count: int) -> Path:
    """A log of ``count`` tool calls for ``scope``, written the way a chat writes it."""
    folder = folder_of(data_dir, scope)
    async with anyio.create_task_group() as tg:
        log = AuditLog(folder, scope, AuditKey(SECRET.encode()), task_group=tg)
        for n in range(count):
            log.record("tool_call", server="docs", tool=f"tool{n}", outcome="ok", duration_us=n)
        await log.flush()
    return folder


def playa_audit(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "playa", "audit", *args, "--data-dir", str(data_dir)],
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "MCP_ENCRYPTION_SECRET": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def lines_of(folder: Path) -> list[bytes]:
    return (folder / "audit.jsonl").read_bytes().splitlines(keepends=True)


def edited(line: bytes) -> bytes:
    record = json.loads(line)
    record["fields"]["outcome"] = "error"
    return json.dumps(record).encode() + b"\n"


# Each tamper: the log's lines (and another chat's) in, the lines written back out, and the line
# (1-based; 0 for the head record) where the verifier must say the chain breaks.
Tamper = Callable[[list[bytes], list[bytes]], list[bytes]]
TAMPERS: dict[str, tuple[Tamper, int]] = {
    "edited": (lambda lines, other: [*lines[:2], edited(lines[2]), *lines[3:]], 3),
    "deleted": (lambda lines, other: [*lines[:2], *lines[3:]], 3),
    "reordered": (lambda lines, other: [*lines[:2], lines[3], lines[2], *lines[4:]], 3),
    "replayed from an earlier position": (lambda lines, other: [*lines[:4], lines[1], *lines[4:]], 5),
    "replayed at its own position from another chat": (
        lambda lines, other: [*lines[:2], other[2], *lines[3:]],
        3,
    ),
    "appended from another chat": (lambda lines, other: [*lines, other[-1]], 7),
    "tail cut": (lambda lines, other: lines[:4], 0),
    "emptied": (lambda lines, other: [], 0),
}


async def test_an_untouched_log_verifies_and_exports_as_json_lines(data_dir: Path, tmp_path: Path) -> None:
    await write_log(data_dir, SCOPE, 6)
    done = await anyio.to_thread.run_sync(lambda: playa_audit("verify", "--chat", SCOPE, data_dir=data_dir))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"The audit log of {SCOPE} is whole: 6 records, the last #6 at ")
    out = tmp_path / "export.jsonl"
    done = await anyio.to_thread.run_sync(
        lambda: playa_audit("export", "--chat", SCOPE, "-o", str(out), data_dir=data_dir)
    )
    assert done.returncode == 0, done.stderr
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["seq"], r["kind"], r["fields"]["tool"]) for r in exported] == [
        (n + 1, "tool_call", f"tool{n}") for n in range(6)
    ]


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
async def test_playa_audit_verify_says_where_a_tampered_log_breaks(data_dir: Path, tamper: str) -> None:
    folder = await write_log(data_dir, SCOPE, 6)
    other = await write_log(data_dir, "console:other", 6)
    change, line = TAMPERS[tamper]
    (folder / "audit.jsonl").write_bytes(b"".join(change(lines_of(folder), lines_of(other))))
    done = await anyio.to_thread.run_sync(lambda: playa_audit("verify", "--chat", SCOPE, data_dir=data_dir))
    assert done.returncode == 1, done.stdout
    where = f"line {line}: " if line else ""
    assert f"playa: the audit log of {SCOPE} breaks at {where}" in done.stderr, done.stderr
    # Export writes what verifies, and fails all the same.
    done = await anyio.to_thread.run_sync(lambda: playa_audit("export", "--chat", SCOPE, data_dir=data_dir))
    assert done.returncode == 1 and "breaks at" in done.stderr


async def test_a_head_record_copied_from_another_chat_or_deleted_is_found(data_dir: Path) -> None:
    folder = await write_log(data_dir, SCOPE, 3)
    other = await write_log(data_dir, "console:other", 3)
    (folder / "audit.head.json").write_bytes((other / "audit.head.json").read_bytes())
    found = verify_log(folder, SCOPE, AuditKey(SECRET.encode()))
    assert [str(b) for b in found.breaks] == [
        "the head record does not verify (edited, or copied from another chat)"
    ]
    (folder / "audit.head.json").unlink()
    found = verify_log(folder, SCOPE, AuditKey(SECRET.encode()))
    assert [str(b) for b in found.breaks] == ["the head record is missing"]


async def test_the_chain_goes_on_across_restarts_and_a_cut_tail_stays_visible(data_dir: Path) -> None:
    key = AuditKey(SECRET.encode())
    folder = await write_log(data_dir, SCOPE, 3)
    await write_log(data_dir, SCOPE, 2)  # a new process: the chain goes on where it ended
    found = verify_log(folder, SCOPE, key)
    assert found.ok and [r.seq for r in found.records] == [1, 2, 3, 4, 5]
    # The tail is cut while the chat is away; its next records follow the head, not the cut log.
    (folder / "audit.jsonl").write_bytes(b"".join(lines_of(folder)[:3]))
    await write_log(data_dir, SCOPE, 1)
    found = verify_log(folder, SCOPE, key)
    assert [str(b) for b in found.breaks] == [
        "line 4: record 4 to 5 is missing before record 6 (deleted or reordered)"
    ]


async def test_a_log_whose_head_was_removed_says_so_in_its_next_record(data_dir: Path) -> None:
    folder = await write_log(data_dir, SCOPE, 2)
    (folder / "audit.head.json").unlink()
    await write_log(data_dir, SCOPE, 1)
    records = read_records(folder)
    assert [(r.seq, r.kind) for r in records] == [
        (1, "tool_call"),
        (2, "tool_call"),
        (3, "audit_head_lost"),
        (4, "tool_call"),
    ]
    assert records[2].fields == {"why": "missing", "last_seq": 2}


async def test_a_record_holds_only_short_scalar_fields_with_known_secrets_redacted(data_dir: Path) -> None:
    folder = folder_of(data_dir, SCOPE)
    async with anyio.create_task_group() as tg:
        log = AuditLog(
            folder,
            SCOPE,
            AuditKey(SECRET.encode()),
            task_group=tg,
            redact=lambda t: t.replace(HEADER_CANARY, "[redacted]"),
        )
        with pytest.raises(TypeError):
            log.record("tool_call", arguments={"text": ARGUMENT_CANARY})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="short lower-case name"):
            log.record("Tool Call")
        log.record("tool_call", server=f"named {HEADER_CANARY}", tool="t" * 500)
        await log.flush()
    (record,) = read_records(folder)
    assert record.fields["server"] == "named [redacted]"
    assert record.fields["tool"] == "t" * 199 + "…"


# The chat's hooks, against the SDK's server on loopback.


def tools_server() -> MCPServer:
    server = MCPServer("tools")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool()
    def fail() -> str:
        """Fail."""
        raise ToolError("it failed")

    return server


async def audit_of(chat: OwnerChat) -> list[AuditRecord]:
    session = await chat.session()
    servers = chat.extension.chat(session)
    await servers.audit.flush()
    found = verify_log(
        folder_of(chat.host.config.data_dir, chat.scope), chat.scope, AuditKey(SECRET.encode())
    )
    assert found.ok, found.breaks
    return list(found.records)


async def test_a_loopback_servers_calls_are_recorded_with_whose_turn_outcome_and_sizes_and_no_secret(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(60):
        async with (
            serve_mcp(tools_server(), bearer=HEADER_CANARY) as served,
            owner_chat(data_dir, host_secret, SCOPE) as chat,
        ):
            added = await chat.command(f"/mcp_add tools {served.url} --bearer {HEADER_CANARY}")
            assert added.startswith("Added tools: connected"), added
            arguments = json.dumps({"text": f"{ARGUMENT_CANARY} and {HEADER_CANARY}"})
            reply = await chat.say(f"tools__echo {arguments}")
            assert ARGUMENT_CANARY in reply.text
            session = await chat.session()
            await chat.host.handle(session, msg("tools__fail {}", GUEST), ScriptedUI())
            records = await audit_of(chat)
    added_record, echo, fail = records
    assert (added_record.kind, added_record.fields["server"], added_record.fields["auth"]) == (
        "server_added",
        "tools",
        "bearer",
    )
    assert echo.kind == "tool_call"
    assert {k: v for k, v in echo.fields.items() if k != "duration_us"} == {
        "sender": "owner",
        "server": "tools",
        "tool": "echo",
        "outcome": "ok",
        "policy": "allow",
        "decision": "allowed",
        # As the model sent them: the key it never saw, redacted.
        "arguments_bytes": len(
            json.dumps({"text": f"{ARGUMENT_CANARY} and [redacted]"}, separators=(",", ":"))
        ),
        "result_bytes": echo.fields["result_bytes"],
    }
    assert isinstance(echo.fields["result_bytes"], int) and echo.fields["result_bytes"] >= len(
        ARGUMENT_CANARY
    )
    assert isinstance(echo.fields["duration_us"], int) and echo.fields["duration_us"] > 0
    assert (fail.fields["sender"], fail.fields["tool"], fail.fields["outcome"]) == ("guest", "fail", "error")
    written = b"".join(path.read_bytes() for path in folder_of(data_dir, SCOPE).glob("audit*"))
    assert HEADER_CANARY.encode() not in written and ARGUMENT_CANARY.encode() not in written


async def test_a_call_that_times_out_is_recorded_as_a_timeout(
    data_dir: Path, host_secret: HostSecret
) -> None:
    release = anyio.Event()
    server = MCPServer("slow")

    @server.tool()
    async def hang() -> str:
        """Answer once released."""
        await release.wait()
        return "late"

    # The short timeout is the thing under test; connecting stays generous.
    settings = replace(SETTINGS, connection=replace(HEALTHY, call_timeout=0.5))
    with anyio.fail_after(60):
        async with (
            serve_mcp(server) as served,
            owner_chat(data_dir, host_secret, SCOPE, settings=settings) as chat,
        ):
            try:
                assert (await chat.command(f"/mcp_add slow {served.url}")).startswith("Added slow: connected")
                await chat.say("slow__hang {}")
                records = await audit_of(chat)
            finally:
                release.set()
    call = records[-1]
    assert (call.kind, call.fields["tool"], call.fields["outcome"]) == ("tool_call", "hang", "timeout")
    assert isinstance(call.fields["duration_us"], int) and call.fields["duration_us"] >= 500_000


async def test_adds_replacements_removals_and_restores_are_recorded(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(60):
        async with serve_mcp(tools_server()) as served, owner_chat(data_dir, host_secret, SCOPE) as chat:
            assert (await chat.command(f"/mcp_add tools {served.url}")).startswith("Added tools")
            assert (await chat.command(f"/mcp_add tools {served.url} --tools echo")).startswith(
                "Replaced tools"
            )
            await chat.command("/mcp_remove tools")
            await chat.command("/mcp_restore")
            records = await audit_of(chat)
    assert [(r.kind, r.fields.get("server")) for r in records] == [
        ("server_added", "tools"),
        ("server_replaced", "tools"),
        ("server_removed", "tools"),
        ("servers_restored", None),
    ]
    assert records[2].fields["revoked"] == "nothing"


async def test_mcp_audit_shows_the_latest_records_to_the_owner_only_and_privately(
    data_dir: Path, host_secret: HostSecret
) -> None:
    owner, in_group = ScriptedUI(), ScriptedUI(private_place="in our private chat")
    with anyio.fail_after(60):
        async with serve_mcp(tools_server()) as served, owner_chat(data_dir, host_secret, SCOPE) as chat:
            told = await chat.command("/mcp_audit", owner)
            assert told == "I sent you the latest records of this chat's audit log above."
            assert owner.private == ["The audit log of this chat is empty."]
            await chat.command(f"/mcp_add tools {served.url}")
            for n in range(3):
                await chat.say(f'tools__echo {{"text": "call {n}"}}')
            told = await chat.command("/mcp_audit 2", in_group)
            member = ScriptedUI()
            refused = await chat.host.handle(await chat.session(), msg("/mcp_audit", GUEST), member)
            usage = await chat.command("/mcp_audit lots")
            keyed = await chat.command(f"/mcp_audit {HEADER_CANARY}")
            await chat.command("/mcp_audit", owner)
    assert told == "I sent you the latest records of this chat's audit log in our private chat."
    (shown,) = in_group.private
    lines = shown.splitlines()
    assert lines[0] == "The latest 2 record(s) of this chat's audit log:"
    assert [line.split()[0] for line in lines[1:]] == ["#3", "#4"]
    assert "tool_call sender=owner server=tools tool=echo outcome=ok" in lines[1]
    assert "call 1" not in shown  # an argument's value is never recorded
    assert refused is not None and refused.text == "Only this chat's owner can use /mcp_audit."
    assert not member.private and not member.sent
    assert usage.startswith("usage: /mcp_audit [n]")
    assert keyed.startswith("usage: /mcp_audit [n]") and HEADER_CANARY not in keyed
    assert len(owner.private[-1].splitlines()) == 1 + 4


async def test_the_agents_workspace_tools_cannot_reach_the_log(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(60):
        async with serve_mcp(tools_server()) as served, owner_chat(data_dir, host_secret, SCOPE) as chat:
            await chat.command(f"/mcp_add tools {served.url}")
            await audit_of(chat)
            session = await chat.session()
            log = folder_of(data_dir, SCOPE) / "audit.jsonl"
            assert log.is_file()
            relative = Path("..", "..", *log.relative_to(data_dir).parts)
            assert (session.workspace / relative).resolve() == log.resolve()
            replies = [
                await chat.host.call_tool(session, tool, arguments)
                for tool, arguments in [
                    ("read_file", {"path": str(relative)}),
                    ("read_file", {"path": str(log)}),
                    ("write_file", {"path": str(relative), "content": "{}\n"}),
                    ("list_files", {"path": str(relative.parent)}),
                ]
            ]
    for reply in replies:
        assert reply.is_error, reply.text
        assert "server_added" not in reply.text and '"mac"' not in reply.text
    # Neither written over nor listed: the log is as the chat wrote it.
    assert read_records(log.parent)[0].kind == "server_added"
    assert verify_log(log.parent, SCOPE, AuditKey(SECRET.encode())).ok


def changing_server() -> MCPServer:
    server = MCPServer("changing")

    def lookup(word: str) -> str:
        return word

    server.add_tool(lookup, description="Look up a word.")

    @server.tool()
    async def change(ctx: Context, version: int) -> str:
        """Rewrite what lookup says it does, and tell the clients."""
        server.remove_tool("lookup")
        server.add_tool(lookup, description=f"Look up a word, version {version}.")
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return "changed"

    return server


async def test_approvals_and_rejections_are_recorded(data_dir: Path, host_secret: HostSecret) -> None:
    owner = ScriptedUI()
    every_change = replace(SETTINGS, approval_interval=0.001)
    with anyio.fail_after(60):
        async with (
            serve_mcp(changing_server()) as served,
            owner_chat(data_dir, host_secret, SCOPE, settings=every_change) as chat,
        ):
            assert (await chat.command(f"/mcp_add changing {served.url}", owner)).startswith("Added changing")
            for version, decision in [(1, "/mcp_approve"), (2, "/mcp_reject")]:
                shown = len(owner.approvals)
                await chat.host.call_tool(await chat.session(), "changing__change", {"version": version})
                await owner.approval_shown(shown + 1)
                await chat.command(f"{decision} changing", owner)
            records = await audit_of(chat)
    decided = [(r.kind, r.fields) for r in records if r.kind in ("approved", "rejected")]
    assert decided == [
        ("approved", {"server": "changing", "tools": 1, "instructions": False}),
        ("rejected", {"server": "changing", "tools": 1, "instructions": False}),
    ]


@pytest.mark.npm
async def test_logins_completed_and_failed_are_recorded_without_a_token(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(120):
        async with protected_chat(data_dir, host_secret) as (_, mcp, host, session):
            ui = await log_in(host, session, mcp.url)
            said = await log_in_again(host, session, ui, browser=refuse_sign_in)
            assert said.startswith("The login to linear failed"), ui.sent
            (extension,) = host.extensions
            assert isinstance(extension, RemoteMcpExtension)
            await extension.chat(session).audit.flush()
            grant = extension.chat(session).servers["linear"].login.grant
            assert grant is not None and grant.grant.tokens is not None
            token = grant.grant.tokens.access_token
    folder = folder_of(data_dir, session.scope)
    found = verify_log(folder, session.scope, AuditKey(SECRET.encode()))
    assert found.ok, found.breaks
    logins = [(r.kind, r.fields) for r in found.records if r.kind.startswith("login")]
    assert logins == [("login_completed", {"server": "linear"}), ("login_failed", {"server": "linear"})]
    written = b"".join(path.read_bytes() for path in folder.glob("audit*"))
    assert token.encode() not in written


@pytest.mark.npm
async def test_a_refresh_the_authorization_server_refuses_is_recorded_without_a_token(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(120):
        # Tokens that live 30 s are within the refresh margin: every connect refreshes first.
        async with authorization_server(access_ttl=30) as auth, protected_server(auth) as mcp:
            async with remote_host(data_dir, host_secret) as host:
                session = await host.session(OAUTH_SCOPE, owner="owner")
                await log_in(host, session, mcp.url)
            (entry,) = ServerStore(session.workspace, OAUTH_SCOPE, Sealer(host_secret.value)).load().entries
            assert (
                entry.oauth is not None and entry.oauth.tokens is not None and entry.oauth.client is not None
            )
            refresh_token = entry.oauth.tokens.refresh_token
            assert refresh_token
            # The owner revokes the grant at the authorization server: the next refresh is refused.
            async with httpx2.AsyncClient() as client:
                revoked = await client.post(
                    f"{auth.issuer}/token/revocation",
                    data={"token": refresh_token, "client_id": entry.oauth.client.client_id},
                )
            assert revoked.status_code == 200
            async with owner_chat(data_dir, host_secret, OAUTH_SCOPE) as chat:
                await chat.say("hello")
                listed = await chat.command("/mcp_list")
                assert "authorization expired" in listed.splitlines()[0], listed
                records = await audit_of(chat)
    refused = [r.fields for r in records if r.kind == "refresh_failed"]
    assert refused and all(fields == {"server": "linear", "status": 400} for fields in refused), refused
    written = b"".join(path.read_bytes() for path in folder_of(data_dir, OAUTH_SCOPE).glob("audit*"))
    assert refresh_token.encode() not in written and entry.oauth.tokens.access_token.encode() not in written


@pytest.mark.npm
async def test_the_revocations_of_replaced_tokens_are_recorded(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(120):
        async with (
            protected_chat(data_dir, host_secret) as (_, mcp, host, session),
            serve_mcp(MCPServer("plain")) as plain,
        ):
            ui = await log_in(host, session, mcp.url)
            # A new login revokes the tokens of the one before, once its own are sealed.
            said = await log_in_again(host, session, ui)
            assert said.startswith("Logged in to linear: connected"), ui.sent
            revocations = [
                r.fields for r in await audit_of(OwnerChat(host, session.scope)) if r.kind == "tokens_revoked"
            ]
            assert revocations == [
                {"server": "linear", "replaced_by": "login", "outcome": "revoked", "why": None}
            ]
            # An entry that needs no login takes the name: the grant it abandons is revoked once it
            # connected, in the background.
            added = await host.handle(session, msg(f"/mcp_add linear {plain.url}"), ScriptedUI())
            assert added is not None and added.text.startswith("Replaced linear: connected"), added
            while len(revocations) < 2:
                await anyio.sleep(0.05)  # polls what a background task leaves; bounded by fail_after
                revocations = [
                    r.fields
                    for r in await audit_of(OwnerChat(host, session.scope))
                    if r.kind == "tokens_revoked"
                ]
    assert revocations[1] == {"server": "linear", "replaced_by": "entry", "outcome": "revoked", "why": None}


async def test_a_secret_deleted_from_the_chat_is_recorded_with_its_sender_and_whether_it_went(
    data_dir: Path,
) -> None:
    # The real Telegram front end against a fake Bot API on loopback: each way a message with a
    # secret leaves the chat (a command through the host, a key on its own, an edit) is recorded.
    token, key = (
        "123456789:AAHfakeTokenForTestsOnly0123456789abcd",
        "sk-proj-Hk7Tq2Wm9Xz4Lp6Rv3Ns8Bd1Fg5Jc0Ya",
    )
    fake = FakeBotApi(token)
    config = HostConfig(data_dir=data_dir, model="offline")
    environ = {
        "MCP_ENCRYPTION_SECRET": SECRET,
        "TELEGRAM_BOT_TOKEN": token,
        "PLAYA_EGRESS_ALLOW": "127.0.0.1/32",
    }
    extension = remote_mcp(config, environ, console=False)
    chats = {"telegram:301": "301", "telegram:302": "302", "telegram:303": "303", "telegram:-1401": "1402"}
    with anyio.fail_after(60):
        async with (
            serve_asgi(fake.app()) as api,
            serve_mcp(MCPServer("plain")) as plain,
            Host(config, [extension]) as host,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(
                partial(
                    run_telegram,
                    host,
                    token=token,
                    base_url=api.url,
                    settings=TelegramSettings(poll_timeout=5),
                )
            )
            await fake.wait_call("getUpdates")
            command = f"/mcp_policy docs {key} deny"  # no server of that name: nothing connects
            fake.send(private_chat(301), command, sender=user(301))
            await fake.wait_reply(301, "no server named")
            fake.send(private_chat(301), key, sender=user(301))
            await fake.wait_reply(301, "looks like a key")
            fake.fail_delete = True
            fake.send(private_chat(302), command, sender=user(302))
            await fake.wait_reply(302, "rotate the key")
            fake.fail_delete = False
            # The answer to a secret question, deleted by the question itself.
            fake.send(private_chat(303), f"/mcp_add plain {plain.url} --bearer", sender=user(303))
            await fake.wait_reply(303, "Send the bearer token")
            fake.send(private_chat(303), "plain-token-Tq7Wm2Xz9Lp4Rv6Ns3Bd8", sender=user(303))
            await fake.wait_reply(303, "Added plain")
            fake.administrators[-1401] = [creator(user(1402))]
            said = fake.send(group_chat(-1401), "hello everyone", sender=user(1403))
            await fake.wait_reply(-1401, "[offline model]")
            fake.send(group_chat(-1401), command, sender=user(1403), kind="edited_message", message_id=said)
            await fake.wait_reply(-1401, "rotate that key")
            for scope, owner in chats.items():
                await extension.chat(await host.session(scope, owner=owner)).audit.flush()
            tg.cancel_scope.cancel()
    fake.close()
    deleted: dict[str, list[dict[str, FieldValue]]] = {}
    for scope in chats:
        found = verify_log(folder_of(data_dir, scope), scope, AuditKey(SECRET.encode()))
        assert found.ok, found.breaks
        deleted[scope] = [r.fields for r in found.records if r.kind == "secret_deleted"]
        assert key.encode() not in b"".join(p.read_bytes() for p in folder_of(data_dir, scope).glob("audit*"))
    assert deleted == {
        "telegram:301": [{"sender": "301", "deleted": True}, {"sender": "301", "deleted": True}],
        "telegram:302": [{"sender": "302", "deleted": False}],
        "telegram:303": [{"sender": "303", "deleted": True}],
        "telegram:-1401": [{"sender": "1403", "deleted": True}],
    }


async def test_the_latest_records_are_read_from_the_end_of_a_long_log_and_each_is_checked(
    data_dir: Path,
) -> None:
    folder = await write_log(data_dir, SCOPE, 1000)  # over 64 KiB: read in several chunks
    lines = lines_of(folder)
    (folder / "audit.jsonl").write_bytes(b"".join([*lines[:-2], edited(lines[-2]), lines[-1]]))
    async with anyio.create_task_group() as tg:
        log = AuditLog(folder, SCOPE, AuditKey(SECRET.encode()), task_group=tg)
        latest = await log.latest(300)
        one = await log.latest(1)
    assert [r.seq for r, _ in latest] == list(range(701, 1001))
    # Each is checked as it is shown: the edited one is marked.
    assert [r.seq for r, verified in latest if not verified] == [999]
    assert [(r.seq, verified) for r, verified in one] == [(1000, True)]


async def test_a_chat_moved_to_a_new_scope_goes_on_with_its_chain(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(60):
        async with (
            serve_mcp(tools_server()) as served,
            owner_chat(data_dir, host_secret, "telegram:-5") as chat,
        ):
            assert (await chat.command(f"/mcp_add tools {served.url}")).startswith("Added tools")
            moved = await chat.host.move_scope("telegram:-5", "telegram:-1005", owner="owner")
            assert moved == "moved"
            chat.scope = "telegram:-1005"
            await chat.command("/mcp_remove tools")
            records = await audit_of(chat)
    assert [(r.seq, r.kind) for r in records] == [
        (1, "server_added"),
        (2, "chat_moved"),
        (3, "server_removed"),
    ]
    assert records[1].fields == {"from": "telegram:-5"}
    done = await anyio.to_thread.run_sync(
        lambda: playa_audit("verify", "--chat", "telegram:-1005", data_dir=data_dir)
    )
    assert done.returncode == 0, done.stderr
    # The records before the move are the old scope's: under the new one alone they would not verify.
    lines = lines_of(folder_of(data_dir, "telegram:-1005"))
    (folder_of(data_dir, "telegram:-1005") / "audit.jsonl").write_bytes(b"".join([lines[0], lines[2]]))
    done = await anyio.to_thread.run_sync(
        lambda: playa_audit("verify", "--chat", "telegram:-1005", data_dir=data_dir)
    )
    assert done.returncode == 1 and "breaks at line 1: record 1 does not verify" in done.stderr, done.stderr


class Name(BaseModel):
    name: str


async def test_a_servers_question_is_recorded_with_how_it_was_answered_never_the_values(
    data_dir: Path, host_secret: HostSecret
) -> None:
    server = MCPServer("asking")

    @server.tool()
    async def greet(ctx: Context) -> str:
        """Ask for a name."""
        answer = await ctx.elicit("What is your name?", Name)
        return f"{answer.action}"

    with anyio.fail_after(60):
        async with (
            serve_mcp(server, protocols="handshake") as served,
            owner_chat(data_dir, host_secret, SCOPE) as chat,
        ):
            assert (await chat.command(f"/mcp_add asking {served.url}")).startswith("Added asking")
            await chat.say("asking__greet {}", ScriptedUI(replies=[f"/accept name={ARGUMENT_CANARY}"]))
            await chat.say("asking__greet {}", ScriptedUI())
            records = await audit_of(chat)
    asked = [r.fields for r in records if r.kind == "question"]
    assert asked == [
        {"server": "asking", "sender": "owner", "fields": 1, "link": False, "answer": "accept"},
        {"server": "asking", "sender": "owner", "fields": 1, "link": False, "answer": "cancel"},
    ]
    written = b"".join(path.read_bytes() for path in folder_of(data_dir, SCOPE).glob("audit*"))
    assert ARGUMENT_CANARY.encode() not in written


async def test_a_task_that_outlives_its_call_is_recorded_when_it_finishes(
    data_dir: Path, host_secret: HostSecret
) -> None:
    server = TaskServer()
    # Under test: the call returns once its timeout passes, while the task runs on.
    settings = replace(SETTINGS, connection=replace(HEALTHY, call_timeout=1.0, call_max=60.0))
    ui = ScriptedUI()
    with anyio.fail_after(60):
        async with (
            serve_asgi(server, path="/mcp") as served,
            owner_chat(data_dir, host_secret, SCOPE, settings=settings) as chat,
        ):
            assert "h__slow" in await chat.command(f"/mcp_add h {served.url}", ui)
            reply = await chat.say("h__slow", ui)
            assert "is still running on its server as a task" in reply.text
            server.done.set()
            await ui.until(lambda seen: any("the report" in text for text in seen.sent))
            records = await audit_of(chat)
    call, finished = records[-2:]
    assert (call.kind, call.fields["tool"], call.fields["outcome"]) == ("tool_call", "slow", "ok")
    assert (
        finished.kind,
        finished.fields["server"],
        finished.fields["tool"],
        finished.fields["outcome"],
    ) == (
        "task_finished",
        "h",
        "h__slow",
        "ok",
    )


async def test_a_record_after_the_host_stopped_is_dropped_and_logged_not_raised(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = folder_of(data_dir, SCOPE)
    async with anyio.create_task_group() as tg:
        log = AuditLog(folder, SCOPE, AuditKey(SECRET.encode()), task_group=tg)
    log.record("tool_call", server="docs")
    await log.flush()
    assert "an audit record of console:audited after the host stopped was lost" in caplog.text
    assert not (folder / "audit.jsonl").exists()
