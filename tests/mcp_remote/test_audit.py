"""What a chat's audit log records: the calls of a real loopback server with their outcome, the
owner's changes, logins and answers, never a secret; and only the owner reads it.

How the log itself is kept and verified: ``tests/mcp_remote/store/test_audit.py``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from tests.telegram.fake_bot_api import FakeBotApi, creator, group_chat, private_chat, user

from playa.mcp_remote import AuditKey, HostSecret, RemoteMcpExtension, verify_log
from playa.mcp_remote.store import AuditRecord, FieldValue, Sealer, ServerStore, read_records
from playa.telegram import TelegramSettings
from servers.greeting import greeting_server
from servers.oidc import authorization_server
from servers.python_servers import serve_asgi, serve_mcp
from servers.task_server import TaskServer
from support.audit import ARGUMENT_CANARY, HEADER_CANARY, SCOPE, SECRET, folder_of, lines_of, playa_audit
from support.chat import GUEST, ScriptedUI, msg
from support.cli_host import cli_host
from support.oauth import SCOPE as OAUTH_SCOPE
from support.oauth import log_in, log_in_again, protected_chat, protected_server, refuse_sign_in
from support.remote import HEALTHY, SETTINGS, OwnerChat, owner_chat, remote_host
from support.telegram import bot_running

pytestmark = pytest.mark.anyio


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
        ("approved", {"server": "changing", "tools": 1, "instructions": False, "prompts": 0, "skills": 0}),
        ("rejected", {"server": "changing", "tools": 1, "instructions": False, "prompts": 0, "skills": 0}),
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
            async with httpx2.AsyncClient(timeout=60.0) as client:
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
    environ = {
        "MCP_ENCRYPTION_SECRET": SECRET,
        "TELEGRAM_BOT_TOKEN": token,
        "PLAYA_EGRESS_ALLOW": "127.0.0.1/32",
    }
    chats = {"telegram:301": "301", "telegram:302": "302", "telegram:303": "303", "telegram:-1401": "1402"}
    with anyio.fail_after(60):
        async with (
            serve_asgi(fake.app()) as api,
            serve_mcp(MCPServer("plain")) as plain,
            cli_host(data_dir, environ, console=False) as host,
            bot_running(fake, host, api.url, settings=TelegramSettings(poll_timeout=5)),
        ):
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
            (extension,) = host.extensions
            assert isinstance(extension, RemoteMcpExtension)
            for scope, owner in chats.items():
                await extension.chat(await host.session(scope, owner=owner)).audit.flush()
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


async def test_a_servers_question_is_recorded_with_how_it_was_answered_never_the_values(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(60):
        async with (
            serve_mcp(greeting_server(), protocols="handshake") as served,
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
