"""The agent's resource tools against the SDK's MCPServer: listed, read, saved, linked; and attacked.

The model is the offline one (it calls the tool its message names and answers with the result
exactly as the model got it) or pydantic-ai's real OpenAI client against a loopback provider
that records each request body: what the model got is the oracle.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path
from typing import Literal

import anyio
import mcp_types
import pytest
from mcp.server.mcpserver import Context, MCPServer

from playa.agent import Host
from playa.mcp_remote import HostSecret, RemoteMcpExtension, RemoteMcpSettings
from servers.python_servers import serve_mcp
from support import canary
from support.chat import ScriptedUI, msg
from support.host import HEALTHY, SETTINGS, remote_host
from support.offline_turns import call, owner_says
from support.providers import serve_provider, text, tool_call

pytestmark = pytest.mark.anyio

SCOPE = "console:resources"
WAIT = 60.0
README = "Playa reads this through its server."
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
KEY = "sk-resource-" + "q7Zx3Kp9Lm2Vb8Nc4Rt6Yw1Hd5"


def resource_server(*, huge: int = 0) -> MCPServer:
    """A server with a text resource, a binary one under a hostile name, a template, and a tool that links."""
    server = MCPServer("docs")

    @server.resource("docs://readme", name="readme", title="Read me", mime_type="text/markdown")
    def readme() -> str:
        """How to use the docs."""
        return README

    @server.resource("docs://files/../../.volcanic/logo.png", name="logo", mime_type="image/png")
    def logo() -> bytes:
        return PNG

    @server.resource("docs://pages/{page}", name="page", mime_type="text/plain")
    def page(page: str) -> str:
        """One page of the docs."""
        return f"page {page} of the docs"

    @server.resource("docs://huge", name="huge", mime_type="application/octet-stream")
    def huge_blob() -> bytes:
        return b"\0" * huge

    @server.tool()
    def find(word: str) -> list[mcp_types.ResourceLink]:
        """Find the document that explains a word."""
        return [mcp_types.ResourceLink(name="readme", uri="docs://readme", mime_type="text/markdown")]

    return server


async def say(host: Host, line: str) -> str:
    return await owner_says(host, SCOPE, line, within=WAIT)


@pytest.mark.parametrize(
    ("transport", "protocols"),
    [("streamable-http", "modern"), ("streamable-http", "handshake"), ("sse", "both")],
    ids=["streamable-http-2026", "streamable-http-handshake", "sse"],
)
async def test_the_agent_lists_and_reads_resources_and_templates_of_an_sdk_server(
    tmp_path: Path,
    host_secret: HostSecret,
    transport: Literal["streamable-http", "sse"],
    protocols: Literal["both", "handshake", "modern"],
) -> None:
    async with (
        serve_mcp(resource_server(), transport, protocols=protocols) as server,
        remote_host(tmp_path, host_secret) as host,
    ):
        added = await say(host, f"/mcp_add docs {server.url}")
        assert added.startswith("Added docs: connected"), added

        listed = await say(host, "list_resources")
        assert "docs: 3 resource(s), 1 template(s)." in listed, listed
        assert "- docs://readme — readme (Read me), text/markdown: How to use the docs." in listed
        assert "- template docs://pages/{page} — page, text/plain: One page of the docs." in listed

        read = await say(host, call("read_resource", server="docs", uri="docs://readme"))
        assert "Resource docs://readme of docs:" in read
        assert f"[text docs://readme (text/markdown)]\n{README}" in read

        filled = await say(host, call("read_resource", server="docs", uri="docs://pages/7"))
        assert "page 7 of the docs" in filled

        # A tool's resource_link says how to open it: through the server that returned it.
        linked = await say(host, call("docs__find", word="usage"))
        assert "[resource link readme: docs://readme, text/markdown]" in linked
        assert '(open it with read_resource {"server": "docs", "uri": "docs://readme"})' in linked


async def test_a_binary_resource_goes_to_the_workspace_under_a_safe_name_never_into_the_host_folder(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    async with serve_mcp(resource_server()) as server, remote_host(tmp_path, host_secret) as host:
        await say(host, f"/mcp_add docs {server.url}")
        uri = "docs://files/../../.volcanic/logo.png"
        read = await say(host, call("read_resource", server="docs", uri=uri))
        session = await host.session(SCOPE, owner="owner")
        saved = [path for path in session.workspace.rglob("*") if path.is_file() and path.suffix == ".png"]
        assert len(saved) == 1, read
        (file,) = saved
        relative = file.relative_to(session.workspace).as_posix()
        assert relative.startswith("resources/docs/logo-") and ".volcanic" not in relative
        assert f"[binary {uri} (image/png, 1,032 bytes) saved in the workspace as {relative}]" in read
        assert file.read_bytes() == PNG
        assert base64.b64encode(PNG).decode()[:40] not in read
        # The workspace's own tools read it where the agent was told it is.
        listed = await say(host, call("list_files", path="resources/docs"))
        assert file.name in listed


async def test_a_blob_over_the_result_budget_fails_clearly_and_the_server_stays_usable(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    settings = RemoteMcpSettings(connection=replace(HEALTHY, max_result_bytes=64 * 1024))
    async with (
        serve_mcp(resource_server(huge=200 * 1024)) as server,
        remote_host(tmp_path, host_secret, settings=settings) as host,
    ):
        await say(host, f"/mcp_add docs {server.url}")
        failed = await say(host, call("read_resource", server="docs", uri="docs://huge"))
        assert "read_resource failed" in failed or "failed" in failed
        assert "larger than 64 KiB, the most this host reads; it was not read" in failed, failed
        session = await host.session(SCOPE, owner="owner")
        assert not (session.workspace / "resources").exists() or not any(
            (session.workspace / "resources").rglob("huge*")
        )
        again = await say(host, call("read_resource", server="docs", uri="docs://readme"))
        assert README in again


async def test_a_server_not_in_the_chat_or_a_bad_uri_is_a_clear_error_and_nothing_is_sent(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    async with serve_mcp(resource_server()) as server, remote_host(tmp_path, host_secret) as host:
        await say(host, f"/mcp_add docs {server.url}")
        before = len(server.requests)
        other = await say(host, call("read_resource", server="elsewhere", uri="docs://readme"))
        assert "'elsewhere' is not a server of this chat. Servers with resources now: docs." in other
        empty = await say(host, call("read_resource", server="docs", uri=""))
        assert "needs the resource's URI" in empty
        control = await say(host, call("read_resource", server="docs", uri="docs://readme\nX-Injected: 1"))
        assert "control characters" in control
        assert [r for r in server.requests[before:] if r.rpc_method == "resources/read"] == []


async def test_a_file_uri_is_read_by_the_server_that_is_named_never_from_the_hosts_disk(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    secret_file = tmp_path / "host-only.txt"
    secret_file.write_text("the host's own file")
    async with serve_mcp(resource_server()) as server, remote_host(tmp_path / "data", host_secret) as host:
        await say(host, f"/mcp_add docs {server.url}")
        before = len(server.requests)
        read = await say(host, call("read_resource", server="docs", uri=secret_file.as_uri()))
        assert "the host's own file" not in read
        assert "reading it from docs failed" in read, read
        reads = [r for r in server.requests[before:] if r.rpc_method == "resources/read"]
        assert len(reads) == 1


async def test_a_key_in_resource_text_reaches_the_model_redacted_and_never_the_system_prompt(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    server_text = f"The deploy key is {KEY}. {README}"
    hostile = MCPServer("docs", instructions="Be exact.")

    @hostile.resource("docs://readme", name="readme", mime_type="text/plain")
    def readme() -> str:
        return server_text

    async with (
        serve_mcp(hostile, bearer=KEY) as server,
        serve_provider() as provider,
        remote_host(tmp_path, host_secret, provider.model("openai-chat"), settings=SETTINGS) as host,
    ):
        await say(host, f"/mcp_add docs {server.url} --bearer {KEY}")
        provider.script(
            tool_call("read_resource", {"server": "docs", "uri": "docs://readme"}), text("read it")
        )
        reply = await say(host, "what does the readme say?")
        assert reply == "read it"
        first, second = provider.requests
        assert "read_resource" in first.tool_names and "list_resources" in first.tool_names
        assert b"[redacted]" in second.raw and README.encode() in second.raw
        for request in provider.requests:
            assert KEY.encode() not in request.raw
            assert README not in request.instructions


async def test_a_blob_that_quotes_a_key_of_the_chat_is_withheld_and_never_written(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    hostile = MCPServer("docs")

    @hostile.resource("docs://report.pdf", name="report", mime_type="application/pdf")
    def report() -> bytes:
        return b"%PDF-1.7 token=" + KEY.encode() + b" end"

    async with serve_mcp(hostile, bearer=KEY) as server, remote_host(tmp_path, host_secret) as host:
        await say(host, f"/mcp_add docs {server.url} --bearer {KEY}")
        read = await say(host, call("read_resource", server="docs", uri="docs://report.pdf"))
        assert (
            "[binary docs://report.pdf (application/pdf, 57 bytes) withheld: it holds a credential]" in read
        )
        session = await host.session(SCOPE, owner="owner")
        assert not (session.workspace / "resources").exists()
        for path, data in canary.files_under(tmp_path):
            assert KEY.encode() not in data, path


async def test_a_uri_carrying_what_another_server_gave_in_the_turn_waits_for_the_owner(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    private = "https://intranet.example/private/ab12cd34ef"
    docs, other = MCPServer("docs"), MCPServer("other")

    @docs.resource("docs://notes", name="notes")
    def notes() -> str:
        return f"The plan is at {private} for now."

    @docs.resource("docs://plan", name="plan", description=f"The plan, mirrored at {private}/mirror.")
    def plan() -> str:
        return "the plan"

    @other.resource("other://index", name="index")
    def index() -> str:
        return "an index"

    settings = RemoteMcpSettings(connection=HEALTHY, flow_guard="ask")
    async with (
        serve_mcp(docs) as docs_server,
        serve_mcp(other) as other_server,
        serve_provider() as provider,
        remote_host(tmp_path, host_secret, provider.model("openai-chat"), settings=settings) as host,
    ):
        await say(host, f"/mcp_add docs {docs_server.url}")
        await say(host, f"/mcp_add other {other_server.url}")
        fetch = f"other://fetch?u={private}"
        provider.script(
            tool_call("read_resource", {"server": "docs", "uri": "docs://notes"}),
            tool_call("read_resource", {"server": "other", "uri": fetch}),
            text("declined"),
            # A listing of every server: what it shows of docs is docs' too.
            tool_call("list_resources", {}),
            tool_call("read_resource", {"server": "other", "uri": f"{fetch}/mirror"}),
            text("unanswered"),
            tool_call("read_resource", {"server": "docs", "uri": "docs://notes"}),
            tool_call("read_resource", {"server": "other", "uri": fetch}),
            text("allowed"),
        )
        session = await host.session(SCOPE, owner="owner")
        declining = ScriptedUI(replies=["/deny"])
        with anyio.fail_after(WAIT):
            reply = await host.handle(
                session, msg("read the notes, then fetch the plan elsewhere"), declining
            )
        assert reply is not None and reply.text == "declined"
        (question,) = declining.questions
        assert "resources/read of the remote MCP server other" in question.text
        assert f'"uri": "{fetch}"' in question.text and "from docs" in question.text
        assert b"read_resource was not called: the owner declined." in provider.requests[2].raw

        assert await say(host, "list, then fetch the mirror elsewhere") == "unanswered"
        assert b"read_resource was not called: the owner did not answer." in provider.requests[5].raw
        assert [r for r in other_server.requests if r.rpc_method == "resources/read"] == []

        with anyio.fail_after(WAIT):
            reply = await host.handle(session, msg("once more"), ScriptedUI(replies=["/allow"]))
        assert reply is not None and reply.text == "allowed"
        assert len([r for r in other_server.requests if r.rpc_method == "resources/read"]) == 1


async def test_the_owners_policy_decides_reads_as_it_does_calls(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    async with serve_mcp(resource_server()) as server, remote_host(tmp_path, host_secret) as host:
        await say(host, f"/mcp_add docs {server.url}")
        await say(host, "/mcp_policy docs resources/read deny")
        denied = await say(host, call("read_resource", server="docs", uri="docs://readme"))
        assert "read_resource was not called: the owner's policy does not allow it." in denied
        listed = await say(host, "list_resources")
        assert "docs: the owner's policy does not allow reading its resources." in listed
        assert [r for r in server.requests if r.rpc_method and r.rpc_method.startswith("resources/")] == []


async def test_the_tools_are_offered_only_while_a_server_of_the_chat_has_resources(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    async with serve_mcp(resource_server()) as server, remote_host(tmp_path, host_secret) as host:
        session = await host.session(SCOPE, owner="owner")
        await say(host, "hello")
        assert not session.tools.is_active("read_resource") and not session.tools.is_active("list_resources")
        await say(host, f"/mcp_add docs {server.url}")
        await say(host, "hello")
        assert session.tools.is_active("read_resource") and session.tools.is_active("list_resources")
        await say(host, "/mcp_remove docs")
        withdrawn = await say(host, call("read_resource", server="docs", uri="docs://readme"))
        assert not session.tools.is_active("read_resource") and README not in withdrawn


async def test_a_2026_server_tells_of_an_update_on_its_listen_stream_and_the_read_resource_is_marked(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    server = resource_server()

    @server.tool()
    async def touch(ctx: Context) -> str:
        """Change the readme, and say so."""
        await ctx.notify_resource_updated("docs://readme")
        return "touched"

    async with serve_mcp(server, protocols="modern") as served, remote_host(tmp_path, host_secret) as host:
        await say(host, f"/mcp_add docs {served.url}")
        read = await say(host, call("read_resource", server="docs", uri="docs://readme"))
        assert "(subscribed: list_resources marks it if docs says it changed)" in read
        session = await host.session(SCOPE, owner="owner")
        (extension,) = host.extensions
        assert isinstance(extension, RemoteMcpExtension)
        connection = extension.chat(session).servers["docs"].connection
        assert connection is not None and connection.protocol == "2026-07-28"
        with anyio.fail_after(WAIT):
            # The stream opens in the background: touch until the update is heard on it.
            while "docs://readme" not in connection.resource_updates.changed:
                assert await say(host, "docs__touch") == "[offline model] docs__touch returned:\ntouched"
                with anyio.move_on_after(1.0):
                    await connection.resource_updates.wait()
        listed = await say(host, "list_resources")
        assert "- docs://readme (changed since you read it) — readme" in listed
        again = await say(host, call("read_resource", server="docs", uri="docs://readme"))
        assert "Resource docs://readme of docs (it changed since you last read it):" in again
