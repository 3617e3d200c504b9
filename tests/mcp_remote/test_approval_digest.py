"""An approval's digest: ``/mcp_approve <name> <digest>`` decides exactly the changes that approval showed.

A front end's buttons run the command with the digest, so a press decides what its message
showed: not a newer change shown meanwhile, and still after a restart (the chat forgot what it
showed, the digest did not). The server is the SDK's own on loopback; its ``change`` tool
rewrites what ``lookup`` says it does each time it runs.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer

from playa.host import Approval, Host, HostConfig
from playa.mcp_remote import ConnectionSettings, HostSecret, RemoteMcpExtension, RemoteMcpSettings
from servers.python_servers import serve_mcp
from support.chat import RecordingModel, ScriptedUI, msg

pytestmark = pytest.mark.anyio

SCOPE = "console:digest"
HEALTHY = ConnectionSettings(connect_timeout=15.0, call_timeout=15.0, close_timeout=5.0)


def lookup(word: str) -> str:
    return f"{word}: a word"


def changing_server() -> MCPServer:
    server = MCPServer("changing")
    server.add_tool(lookup, description="Look up a word.")

    @server.tool()
    async def change(ctx: Context, version: int) -> str:
        """Rewrite what lookup says it does, and tell the clients."""
        server.remove_tool("lookup")
        server.add_tool(lookup, description=f"Look up a word, version {version}.")
        await ctx.session.send_tool_list_changed()  # 2025-11-25: the listening stream
        await ctx.notify_tools_changed()  # 2026-07-28: subscriptions/listen streams
        return "changed"

    return server


class OwnerUI(ScriptedUI):
    """The owner's front end; ``shown`` counts the approvals it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.shown = anyio.Event()

    async def approval(self, approval: Approval) -> object:
        ref = await super().approval(approval)
        self.shown.set()
        self.shown = anyio.Event()
        return ref


def remote_host(data_dir: Path, secret: HostSecret, model: RecordingModel) -> Host:
    # Each change is shown when it comes: the bounded approval stream is not under test here.
    settings = RemoteMcpSettings(connection=HEALTHY, approval_interval=0.001)
    extension = RemoteMcpExtension(secret, settings=settings)
    return Host(HostConfig(data_dir=data_dir, model=model.model()), [extension])


async def command(host: Host, text: str, ui: ScriptedUI) -> str:
    session = await host.session(SCOPE, owner="owner")
    reply = await host.handle(session, msg(text), ui)
    assert reply is not None
    return reply.text


async def change(host: Host, owner: OwnerUI, version: int) -> Approval:
    shown = owner.shown
    session = await host.session(SCOPE, owner="owner")
    await host.call_tool(session, "changing__change", {"version": version})
    await shown.wait()
    return owner.approvals[-1]


async def lookup_description(host: Host, model: RecordingModel) -> str | None:
    session = await host.session(SCOPE, owner="owner")
    await host.handle(session, msg("hello"), ScriptedUI())
    tools = {tool.name: tool.description for tool in model.seen[-1][1].function_tools}
    return tools.get("changing__lookup")


async def test_an_approvals_digest_never_approves_a_newer_change_shown_meanwhile(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model, owner = RecordingModel(), OwnerUI()
    with anyio.fail_after(60):
        async with serve_mcp(changing_server()) as server, remote_host(data_dir, host_secret, model) as host:
            added = await command(host, f"/mcp_add changing {server.url}", owner)
            assert added.startswith("Added changing"), added
            first = await change(host, owner, 1)
            second = await change(host, owner, 2)
            assert first.digest and second.digest and first.digest != second.digest

            # The first message's button, pressed after the second was shown: nothing is approved,
            # and the newest state comes as a message of its own.
            stale = await command(host, f"{first.approve} {first.digest}", owner)
            assert stale.startswith("The tools of changing changed again since that message was shown"), stale
            assert "nothing was decided" in stale
            assert owner.approvals[-1].digest == second.digest
            assert len(owner.approvals) == 3
            assert await lookup_description(host, model) is None

            approved = await command(host, f"{second.approve} {second.digest}", owner)
            assert approved.startswith("Approved 1 tool(s) of changing"), approved
            assert await lookup_description(host, model) == "[changing] Look up a word, version 2."


async def test_an_approvals_digest_still_decides_after_a_restart(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model, owner = RecordingModel(), OwnerUI()
    with anyio.fail_after(60):
        async with serve_mcp(changing_server()) as server:
            async with remote_host(data_dir, host_secret, model) as host:
                await command(host, f"/mcp_add changing {server.url}", owner)
                shown = await change(host, owner, 1)
            async with remote_host(data_dir, host_secret, model) as host:
                # The first thing the new host does: the server is still connecting.
                rejected = await command(host, f"{shown.reject} {shown.digest}", ScriptedUI())
                assert rejected.startswith("Rejected 1 tool(s) of changing"), rejected
                assert await lookup_description(host, model) is None
                again = await command(host, f"{shown.approve} {shown.digest}", ScriptedUI())
                assert again == "No tool changes of changing wait for a decision."
