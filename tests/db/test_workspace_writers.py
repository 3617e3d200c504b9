"""Every writer of a chat's files goes through its workspace: with a database, into its rows.

A photo and a document sent to the bot (the fake Bot API), a file the console's owner attaches,
and a binary resource a real MCP server returns all land in PostgreSQL under the chat's scope,
none in the data dir; past the quota each is refused with the workspace's own message and
nothing is kept. What the model got is read from the loopback provider's recorded requests.
"""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from tests.telegram.fake_bot_api import FakeBotApi, private_chat, user

from playa.agent import Host
from playa.db import Database, DatabaseStorage, upgrade
from playa.mcp_remote import HostSecret
from servers.python_servers import serve_asgi, serve_mcp
from support.chat import ScriptedUI, msg
from support.cli_run import on_database, playa_output
from support.host import new_host, remote_host
from support.providers import serve_provider, text
from support.telegram import TOKEN, bot_running

pytestmark = pytest.mark.anyio

WAIT = 60.0
JPEG = b"\xff\xd8\xff\xe0" + b"\x00\x10JFIF\x00" + bytes(range(256)) * 4 + b"\xff\xd9"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
FULL = "the workspace is full: writing {size} bytes would take it to {total} bytes, over its quota of {quota} bytes; delete files first"


@pytest.fixture
async def storage(database: Database) -> DatabaseStorage:
    await upgrade(database)
    return DatabaseStorage(database)


def files_in(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def user_content(body: dict[str, Any]) -> Any:
    """The content of the last user message of an OpenAI Chat Completions request."""
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


async def test_a_photo_and_a_document_sent_to_the_bot_land_in_the_chats_rows_within_the_quota(
    storage: DatabaseStorage, tmp_path: Path
) -> None:
    quota = len(JPEG) + 4
    fake = FakeBotApi(TOKEN)
    async with (
        serve_provider() as provider,
        serve_asgi(fake.app()) as api,
        new_host(tmp_path, provider.model("openai-chat"), storage=storage, workspace_quota=quota) as host,
        bot_running(fake, host, api.url),
    ):
        provider.script(text("a tiny picture"), text("noted"))
        message_id = fake.send_file(private_chat(301), JPEG, sender=user(301), photo=True, caption="what?")
        await fake.wait_reply(301, "a tiny picture")
        mark = fake.mark()
        fake.send_file(
            private_chat(301), b"col\n1\n", sender=user(301), name="data.csv", mime_type="text/csv"
        )
        refused = await fake.wait_reply(301, "could not keep that file", after=mark)
        fake.send_file(
            private_chat(302), b"col\n1\n", sender=user(302), name="data.csv", mime_type="text/csv"
        )
        await fake.wait_reply(302, "noted")
        fake.close()

    photo = f"received/photo-{message_id}.jpg"
    assert await storage.workspace.paths("telegram:301", "") == [photo]
    assert await storage.workspace.read("telegram:301", photo) == JPEG
    assert await storage.workspace.read("telegram:302", "received/data.csv") == b"col\n1\n"
    # Over the quota: the workspace's message, and nothing kept nor shown to the model.
    full = FULL.format(size=6, total=len(JPEG) + 6, quota=quota)
    assert (
        refused.text
        == f"I could not keep that file in the workspace: {full}. Nothing of it was kept or shown to the agent."
    )
    assert len(provider.requests) == 2
    first, second = (user_content(r.body) for r in provider.requests)
    [words] = [part["text"] for part in first if part["type"] == "text"]
    assert words.startswith("what?") and photo in words
    [image] = [part["image_url"]["url"] for part in first if part["type"] == "image_url"]
    assert image == "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()
    assert "received/data.csv" in second
    assert [p for p in files_in(tmp_path) if p.startswith("workspaces/")] == []  # nothing in the data dir


async def test_a_file_the_console_owner_attaches_lands_in_the_rows_or_is_refused_past_the_quota(
    storage: DatabaseStorage, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "report.txt").write_text("tangerine report")
    (tmp_path / "big.txt").write_text("x" * 100)
    env = on_database(database_url, secrets.token_hex(32), PLAYA_WORKSPACE_QUOTA="50")
    lines = f"/attach {tmp_path / 'report.txt'} read this\n/attach {tmp_path / 'big.txt'}\n"
    code, output = playa_output("chat", "--data-dir", str(tmp_path / "data"), env=env, stdin=lines)
    assert code == 0, output
    assert (
        f"Could not keep that file in the workspace: {FULL.format(size=100, total=116, quota=50)}." in output
    )
    [scope] = await storage.workspace.scopes()
    assert await storage.workspace.paths(scope, "") == ["received/report.txt"]
    assert await storage.workspace.read(scope, "received/report.txt") == b"tangerine report"
    assert [p for p in files_in(tmp_path / "data") if p.startswith("workspaces/")] == []
    async with storage.database.connection() as connection:
        history = b"".join(r["message"] for r in await connection.fetch("SELECT message FROM history"))
    assert b"it is in your workspace at received/report.txt" in history


def blob_server() -> MCPServer:
    server = MCPServer("docs")

    @server.resource("docs://files/../../.volcanic/logo.png", name="logo", mime_type="image/png")
    def logo() -> bytes:
        return PNG

    @server.resource("docs://huge", name="huge", mime_type="application/octet-stream")
    def huge() -> bytes:
        return b"\1" * 3000

    return server


async def say(host: Host, words: str) -> str:
    session = await host.session("console:resources", owner="owner")
    with anyio.fail_after(WAIT):
        reply = await host.handle(session, msg(words), ScriptedUI())
    assert reply is not None
    return reply.text


async def test_a_resource_blob_a_server_returns_lands_in_the_rows_and_past_the_quota_is_not_saved(
    storage: DatabaseStorage, tmp_path: Path, host_secret: HostSecret
) -> None:
    async with (
        serve_mcp(blob_server()) as server,
        remote_host(tmp_path, host_secret, storage=storage, workspace_quota=2000) as host,
    ):
        assert (await say(host, f"/mcp_add docs {server.url}")).startswith("Added docs")
        uri = "docs://files/../../.volcanic/logo.png"
        read = await say(host, "read_resource " + json.dumps({"server": "docs", "uri": uri}))
        [path] = await storage.workspace.paths("console:resources", "")
        assert path.startswith("resources/docs/logo-") and path.endswith(".png")
        assert f"[binary {uri} (image/png, 1,032 bytes) saved in the workspace as {path}]" in read
        assert await storage.workspace.read("console:resources", path) == PNG

        huge = await say(host, "read_resource " + json.dumps({"server": "docs", "uri": "docs://huge"}))
        full = FULL.format(size=3000, total=3000 + len(PNG), quota=2000)
        assert f"[binary docs://huge (application/octet-stream, 3,000 bytes) not saved: {full}]" in huge
        # The agent's own tool reads the blob where it was told it is.
        listed = await say(host, "list_files " + json.dumps({"path": "resources/docs"}))
        assert path in listed
    assert await storage.workspace.paths("console:resources", "") == [path]
    assert [p for p in files_in(tmp_path) if p.startswith("workspaces/")] == []
