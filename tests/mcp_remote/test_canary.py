"""A canary credential, used through a whole scripted session, leaks nowhere.

The canary is a bearer token no other text can contain by chance. The session exercises every
path a credential could escape by: the commands and their replies, tool calls (a server that
echoes its request headers, one that echoes its input, one whose errors quote the token, and
one that echoes its header in base64 wrapped by MIME and by PEM and in hex, and in MIME's base64
inside a JSON result, where its line breaks are escapes), a connect error
that quotes it, a tampered file, and a restart. Then every channel out of the
host is searched for the canary in every form :mod:`support.leaks` finds: its literal encoded
forms, its base64 across line breaks and its hex.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.types import Receive, Scope, Send

from playa.agent import Host, Reply
from playa.core import ChatSession, ToolResult, encoded_forms
from playa.demo_server import build_app
from playa.exceptions import ToolUnbound
from playa.mcp_remote import HostSecret
from playa.mcp_remote.store import store_path
from servers.header_echo import dump, header, mime
from servers.python_servers import RunningServer, buffered, closed_port, send_answer, serve_asgi, serve_mcp
from support.chat import RecordingModel, ScriptedUI, msg
from support.leaks import decoded_encodings, leaks
from support.remote import remote_host

pytestmark = pytest.mark.anyio

SCOPE = "console:canary"
SERVERS_JSON = ".volcanic/mcp/servers.json"

# The test servers run in this process, but stand for servers elsewhere: what they log about
# the requests they receive (the token included) is not Playa's output.
SERVER_SIDE_LOGGERS = ("mcp.server", "sse_starlette", "uvicorn", "starlette")


def leaky_server() -> MCPServer:
    """A server whose tool fails with an error that quotes the Authorization header it got, and
    whose other tools answer with that header encoded."""
    server = MCPServer("leaky")

    @server.tool()
    def leak(ctx: Context) -> str:
        """Fail, quoting the credential."""
        headers = ctx.headers or {}
        raise ToolError(f"access denied for {headers.get('authorization')}")

    server.add_tool(mime)

    @server.tool()
    def pem(ctx: Context) -> str:
        """The header in URL-safe base64 at 64 columns and at 7, with CRLF, behind a byte."""
        encoded = base64.urlsafe_b64encode(b"\x00" + header(ctx)).decode()
        return "\r\n".join(
            encoded[at : at + width] for width in (64, 7) for at in range(0, len(encoded), width)
        )

    server.add_tool(dump)

    @server.tool()
    def mime_json(ctx: Context) -> str:
        """The header in base64 with MIME's line breaks, as a JSON string: the breaks are escapes."""
        return json.dumps({"header": base64.encodebytes(header(ctx)).decode()})

    @server.tool()
    def mime_json_page(ctx: Context) -> str:
        """The same after a long log, its '/' escaped as well: a result long enough to be scanned
        by the redactor's block filter rather than searched form by form."""
        log = [f"line {number}: nothing to see here" for number in range(200)]
        page = json.dumps({"log": log, "header": base64.encodebytes(b"\x00" + header(ctx)).decode()})
        return page.replace("/", "\\/")

    return server


class EchoingErrorApp:
    """An HTTP endpoint that answers every JSON-RPC request with an error quoting the Authorization header."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body, _ = await buffered(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            request_id = json.loads(body).get("id")
        except ValueError:
            request_id = None
        if scope["method"] != "POST" or request_id is None:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        error = {"code": -32010, "message": f"bad credentials: {headers.get('authorization')}"}
        data = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
        await send_answer(send, 200, data, [(b"content-length", str(len(data)).encode())])


@asynccontextmanager
async def servers(canary: str) -> AsyncIterator[tuple[RunningServer, RunningServer, RunningServer, str]]:
    async with (
        serve_asgi(build_app(canary, transport="streamable-http"), path="/mcp") as demo,
        serve_mcp(leaky_server(), bearer=canary) as leaky,
        serve_asgi(EchoingErrorApp(), path="/mcp") as echoing,
        closed_port() as down,
    ):
        yield demo, leaky, echoing, down


def read_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, by its path relative to ``root``."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class Transcript:
    """Every text the host gave back: command replies, agent replies, tool results, errors."""

    def __init__(self, host: Host, session: ChatSession) -> None:
        self.host = host
        self.session = session
        self.texts: list[str] = []

    async def send(self, text: str, ui: ScriptedUI | None = None, *, ref: int | None = None) -> Reply:
        reply = await self.host.handle(self.session, msg(text, ref=ref), ui or ScriptedUI())
        assert reply is not None
        self.texts += [reply.text, repr(reply)]
        return reply

    async def call(self, name: str, arguments: dict[str, object]) -> ToolResult:
        result = await self.host.call_tool(self.session, name, arguments)
        self.texts += [result.text, repr(result)]
        return result


async def test_a_canary_token_leaks_nowhere_and_is_stored_only_sealed(
    data_dir: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    canary = "canary-" + uuid.uuid4().hex
    forms = sorted(encoded_forms(canary) | encoded_forms(f"Bearer {canary}"))
    assert canary in forms
    model = RecordingModel()
    after_restart = RecordingModel()
    exceptions: list[str] = []

    with anyio.fail_after(60):
        async with servers(canary) as (demo, leaky, echoing, down):
            async with remote_host(data_dir, host_secret, model) as host:
                session = await host.session(SCOPE, owner="owner")
                chat = Transcript(host, session)

                # Commands: the token asked in secret, and given inline (the message is deleted).
                ui = ScriptedUI(answers=[canary])
                added = await chat.send(f"/mcp_add demo {demo.url} --bearer", ui)
                assert added.text.startswith("Added demo: connected")
                assert ui.asked[0][1] is True
                ui = ScriptedUI()
                await chat.send(f"/mcp_add leaky {leaky.url} --bearer {canary}", ui, ref=1)
                await chat.send(f"/mcp_add down {down} --bearer {canary}", ui, ref=2)
                # A connect error whose text quotes the token.
                quoted = await chat.send(
                    f"/mcp_add echoing {echoing.url} --transport http --bearer {canary}", ui, ref=3
                )
                assert ui.deleted == [1, 2, 3]
                assert "(the server said: error -32010: bad credentials: [redacted])" in quoted.text
                await chat.send("/mcp_list")
                await chat.send("/mcp_tools")
                await chat.send("/mcp_tools demo")

                # Calls through the model: headers echoed back, a tool error quoting the token.
                whoami = await chat.send("demo__whoami")
                assert '"authorization": "[redacted]"' in whoami.text
                leaked = await chat.send("leaky__leak")
                assert "access denied for [redacted]" in leaked.text
                for tool in (
                    "leaky__mime",
                    "leaky__pem",
                    "leaky__dump",
                    "leaky__mime_json",
                    "leaky__mime_json_page",
                ):
                    encoded = await chat.send(tool)
                    assert "[redacted]" in encoded.text, encoded.text
                await chat.send('demo__fail {"message": "no luck"}')
                await chat.send('demo__add {"a": 1, "b": 2}')
                await chat.send("hello")

                # The token, and each encoded form of it, as a tool's input, echoed back.
                # Through the model, so the model-bound gate is what removes it: the literal
                # forms, and its header in hex (the wrapped base64 comes from leaky above: as
                # the JSON of a message, its line breaks would be escapes).
                hexed = [text for text in decoded_encodings(canary) if "\n" not in text]
                inputs = [canary, f"before {canary} after", *forms, *hexed]
                for i, text in enumerate(inputs):
                    echoed = await chat.send("demo__echo " + json.dumps({"text": text}))
                    assert "[redacted]" in echoed.text
                    if i % 40 == 39:
                        await chat.send("/reset")

                # The agent cannot edit the file; another writer does: the entry is ignored.
                original = store_path(session.workspace).read_text()
                forged = original.replace(demo.url, demo.url + "/")
                await chat.send("write_file " + json.dumps({"path": SERVERS_JSON, "content": forged}))
                assert store_path(session.workspace).read_text() == original
                store_path(session.workspace).write_text(forged)
                await chat.send("hello again")
                assert "servers.json is not the file Playa saved last, so it is not used" in (
                    session.prompt.get("Remote MCP servers") or ""
                )
                await chat.send("/mcp_list")
                try:
                    await session.tools.get("demo__whoami").call({})
                except ToolUnbound as exc:
                    exceptions += [str(exc), repr(exc)]
                else:
                    pytest.fail("a rejected server's tool could still be called")
                await chat.send("/mcp_remove leaky")
                ui = ScriptedUI(answers=[canary])
                readded = await chat.send(f"/mcp_add demo {demo.url} --bearer", ui)
                assert readded.text.startswith("Replaced demo: connected")
                texts = chat.texts

            # A restart: another host on the same data dir and secret opens the sealed entries.
            async with remote_host(data_dir, host_secret, after_restart) as host:
                session = await host.session(SCOPE, owner="owner")
                chat = Transcript(host, session)
                whoami = await chat.send("demo__whoami")
                assert '"authorization": "[redacted]"' in whoami.text
                await chat.send("/mcp_list")
                texts += chat.texts

    channels: dict[str, str] = {
        "what the model received": repr(model.seen) + repr(after_restart.seen),
        "replies and tool results": "\n".join(texts),
        "exception texts": "\n".join(exceptions),
    }
    for name, data in read_files(data_dir / "sessions").items():
        if "history.json" not in name:
            continue  # the store's private copy and record: checked with every file below
        channels[f"history file {name}"] = data.decode()
        assert "[redacted]" in channels[f"history file {name}"]  # the whole session is in it
    checked_logs = 0
    for record in caplog.records:
        if record.name.startswith(SERVER_SIDE_LOGGERS):
            continue
        checked_logs += 1
        channels[f"log record {checked_logs} ({record.name})"] = caplog.handler.format(record)
    assert checked_logs > 20  # the DEBUG logs of the client side were captured
    assert any(name.startswith("history file") for name in channels)
    for channel, text in channels.items():
        assert leaks(canary, text) == [], f"leaked into {channel}"

    # On disk, only servers.json refers to the token at all, and only inside its seals.
    files = read_files(data_dir)
    sealed = files[str(store_path(session.workspace).relative_to(data_dir))]
    assert b'"seal"' in sealed and b"Authorization" in sealed
    for name, data in files.items():
        assert leaks(canary, data) == [], f"found in {name}"
