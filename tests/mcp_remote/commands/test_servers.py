"""The owner's commands on the chat's servers (``/mcp_add``, ``/mcp_list``, ``/mcp_tools``,
``/mcp_remove``) in a real host, against Playa's demo server on loopback; and who may run them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest
from pydantic_ai.messages import ModelResponse, TextPart

from playa.mcp_remote import HostSecret, resolve_host_secret
from playa.mcp_remote.store import LoadResult, Saved, Sealer, ServerEntry, ServerStore, store_path
from servers.python_servers import RunningServer, closed_port
from support.chat import GUEST, RecordingModel, Script, ScriptedUI, msg
from support.leaks import leaks
from support.remote import OwnerChat, remote_host

pytestmark = pytest.mark.anyio

SECTION = "Remote MCP servers"
DEMO_TOOLS = ["demo__whoami", "demo__echo", "demo__add", "demo__tiny_image", "demo__fail"]
TEST_TIMEOUT = 30.0


async def test_members_are_told_in_one_line_which_server_was_added_or_removed_never_its_url_or_key(
    demo: RunningServer, demo_token: str, chat: OwnerChat
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        ui = ScriptedUI()
        await chat.say(f"/mcp_add demo {demo.url} --bearer {demo_token}", ui)
        await chat.say(f"/mcp_add demo {demo.url} --bearer {demo_token}", ui)
        await chat.say("/mcp_remove demo", ui)
        await chat.say("/mcp_remove demo", ui)  # nothing to remove: nothing to tell
    assert ui.notices == [
        "The chat's owner added the remote MCP server demo: the agent can use its 5 tools.",
        "The chat's owner replaced the remote MCP server demo: the agent can use its 5 tools.",
        "The chat's owner removed the remote MCP server demo; its 5 tools are gone.",
    ]
    for notice in ui.notices:
        assert "\n" not in notice
        assert demo_token not in notice
        assert urlsplit(demo.url).netloc not in notice


async def test_a_server_added_with_a_secret_bearer_offers_its_tools_and_never_shows_the_token(
    demo: RunningServer, demo_token: str, chat: OwnerChat, recording_model: RecordingModel
) -> None:
    token, model = demo_token, recording_model
    with anyio.fail_after(TEST_TIMEOUT):
        session = await chat.session()
        ui = ScriptedUI(answers=[token])
        added = await chat.say(f"/mcp_add demo {demo.url} --bearer", ui)

        assert ui.asked == [
            (
                "Send the bearer token for demo. It stays out of the conversation, "
                "and I delete your message.",
                True,
            )
        ]
        assert added.kind == "command"
        assert added.text == (
            "Added demo: connected over streamable-http, 5 tools: " + ", ".join(DEMO_TOOLS) + "."
        )
        for name in DEMO_TOOLS:
            assert session.tools.is_active(name)

        whoami = await chat.command("demo__whoami")
        assert set(DEMO_TOOLS) <= model.tools(0)
        head, _, returned = whoami.partition("\n")
        assert head == "[offline model] demo__whoami returned:"
        headers = json.loads(returned)
        # The server did get the token; the chat only ever sees it redacted.
        assert headers["authorization"] == "[redacted]"
        assert headers["host"] == urlsplit(demo.url).netloc
        model_view = repr(model.seen)
        assert "[redacted]" in model_view
        assert leaks(token, whoami) == []
        assert leaks(token, model_view) == []

        listed = await chat.command("/mcp_list")
        assert listed == (
            "demo: connected over streamable-http, 5 tools\n"
            f"  url: {demo.url}\n"
            "  transport: auto (in use: streamable-http, protocol 2026-07-28); tools: all; "
            "auth headers: Authorization"
        )
        tools = await chat.command("/mcp_tools demo")
        assert tools.splitlines()[0] == (
            "demo__whoami — [demo] Show the HTTP request headers this server received with the call, as JSON."
        )
        assert len(tools.splitlines()) == 5
        section = session.prompt.get(SECTION) or ""
        assert "- demo: available, 5 tools (" + ", ".join(DEMO_TOOLS) + ")" in section
        assert leaks(token, listed + tools + section) == []
        assert token not in chat.host.history(session).path.read_text()


@pytest.mark.parametrize("kind", ["folder", "fifo", "version", "json"])
async def test_an_owner_command_moves_a_file_in_the_way_aside_and_says_so(chat: OwnerChat, kind: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with closed_port() as url:
            path = store_path((await chat.session()).workspace)
            path.parent.mkdir(parents=True)
            if kind == "folder":
                (path / "x").mkdir(parents=True)
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "version":
                path.write_text('{"version": 2, "servers": []}')
            else:
                path.write_text("{not json")
            assert (await chat.command("/mcp_list")).startswith("servers.json cannot be used: ")
            first, second = (await chat.command(f"/mcp_add down {url}")).split("\n")
            assert first.startswith("Note: .volcanic/mcp/servers.json ")
            assert first.endswith("; I moved it aside to .volcanic/mcp/servers.json.unreadable.")
            assert second.startswith("Added down, but it is unavailable")
            assert (path.parent / "servers.json.unreadable").exists()
            assert (await chat.command("/mcp_list")).startswith("down: unavailable")


# Who may use the commands


async def test_without_a_host_secret_every_command_says_remote_mcp_is_disabled(data_dir: Path) -> None:
    secret = resolve_host_secret({}, data_dir=data_dir, allow_generate=False)
    assert not isinstance(secret, HostSecret)
    disabled = "Remote MCP is disabled: set MCP_ENCRYPTION_SECRET (or TELEGRAM_BOT_TOKEN) to enable remote MCP servers"
    script = Script([lambda m, i: ModelResponse(parts=[TextPart("plain turn")])])
    with anyio.fail_after(TEST_TIMEOUT):
        async with remote_host(data_dir, secret, script) as host:
            chat = OwnerChat(host, "console:t")
            session = await chat.session()
            ui = ScriptedUI(answers=["abcdefgh12"])
            added = await host.handle(session, msg("/mcp_add demo http://x --bearer abcdefgh12", ref=8), ui)
            assert added is not None and added.text == disabled
            assert ui.deleted == [8]
            assert ui.asked == []
            for command in ("/mcp_add demo http://x --bearer", "/mcp_list", "/mcp_tools", "/mcp_remove demo"):
                assert await chat.command(command, ui) == disabled, command
            assert ui.asked == []
            assert script.seen == []
            assert host.history(session).messages == []
            assert await chat.command("hello") == "plain turn"
            assert session.prompt.get(SECTION) is None
    assert "abcdefgh12" not in repr(script.seen)
    assert not store_path(session.workspace).exists()


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/mcp_add demo http://x --bearer abcdefgh12", "mcp_add"),
        ("/mcp_add demo http://x", "mcp_add"),
        ("/mcp_remove demo", "mcp_remove"),
        ("/mcp_list", "mcp_list"),
        ("/mcp_tools", "mcp_tools"),
        ("/mcp_tools demo", "mcp_tools"),
    ],
)
async def test_only_the_owner_can_use_the_mcp_commands(chat: OwnerChat, text: str, command: str) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        session = await chat.session()
        ui = ScriptedUI(answers=["abcdefgh12"])
        reply = await chat.host.handle(session, msg(text, sender=GUEST, ref=4), ui)
    assert reply is not None and reply.kind == "command"
    assert reply.text == f"Only this chat's owner can use /{command}."
    assert ui.asked == []
    assert ui.deleted == ([4] if "abcdefgh12" in text else [])
    assert not store_path(session.workspace).exists()
    assert chat.host.history(session).messages == []


# What an add wrote is what the chat uses


def count_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each ``ServerStore.load`` from now on, by the names it read."""
    loads: list[str] = []
    real = ServerStore.load

    def load(store: ServerStore) -> LoadResult:
        result = real(store)
        loads.append(",".join(entry.name for entry in result.entries))
        return result

    monkeypatch.setattr(ServerStore, "load", load)
    return loads


async def test_an_added_server_is_picked_up_from_what_was_written_and_the_file_is_not_read_back(
    chat: OwnerChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with closed_port() as url:
            assert (await chat.command("/mcp_list")).startswith("No remote MCP servers")
            loads = count_loads(monkeypatch)
            assert (await chat.command(f"/mcp_add down {url}")).startswith(
                "Added down, but it is unavailable"
            )
            assert (await chat.command(f"/mcp_add later {url}")).startswith("Added later, but")
            listed = await chat.command("/mcp_list")
    assert listed.startswith("down: unavailable") and "\nlater: unavailable" in listed
    assert loads == []


async def test_an_add_that_another_writer_came_before_reads_the_file_whole(
    chat: OwnerChat, host_secret: HostSecret, monkeypatch: pytest.MonkeyPatch
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with closed_port() as url:
            session = await chat.session()
            assert (await chat.command(f"/mcp_add down {url}")).startswith("Added down")
            sealer = Sealer(host_secret.value)
            other = ServerStore(session.workspace, session.scope, sealer, state_dir=session.state_dir)
            real_put = ServerStore.put

            def put(store: ServerStore, entry: ServerEntry) -> Saved:
                if store is not other and entry.name == "later":
                    # Another process of this host writes between the chat's read and its own write.
                    other.put(ServerEntry(name="other", url=url))
                return real_put(store, entry)

            monkeypatch.setattr(ServerStore, "put", put)
            loads = count_loads(monkeypatch)
            assert (await chat.command(f"/mcp_add later {url}")).startswith("Added later")
            assert loads == ["down,other,later"]
            listed = await chat.command("/mcp_list")
    assert [line.split(":")[0] for line in listed.splitlines() if not line.startswith(" ")] == [
        "down",
        "later",
        "other",
    ]
    assert loads == ["down,other,later"]
