"""An approval's digest: ``/mcp_approve <name> <digest>`` decides exactly the changes that approval showed.

A front end's buttons run the command with the digest, so a press decides what its message
showed: not a newer change shown meanwhile, and not a change the chat would now show otherwise
(after a restart it no longer knows the approved definition). The server is the SDK's own on loopback; its ``change`` tool
rewrites what ``lookup`` says it does each time it runs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer

from playa.core import Approval
from playa.mcp_remote import HostSecret
from servers.python_servers import serve_mcp
from support.chat import RecordingModel, ScriptedUI
from support.remote import SETTINGS, OwnerChat, owner_chat

pytestmark = pytest.mark.anyio

SCOPE = "console:digest"
# Each change is shown when it comes: the bounded approval stream is not under test here.
EVERY_CHANGE = replace(SETTINGS, approval_interval=0.001)


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


async def change(chat: OwnerChat, owner: ScriptedUI, version: int) -> Approval:
    shown = len(owner.approvals)
    await chat.host.call_tool(await chat.session(), "changing__change", {"version": version})
    return await owner.approval_shown(shown + 1)


async def lookup_description(chat: OwnerChat, model: RecordingModel) -> str | None:
    await chat.say("hello")
    tools = {tool.name: tool.description for tool in model.seen[-1][1].function_tools}
    return tools.get("changing__lookup")


async def test_an_approvals_digest_never_approves_a_newer_change_shown_meanwhile(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model, owner = RecordingModel(), ScriptedUI()
    with anyio.fail_after(60):
        async with (
            serve_mcp(changing_server()) as server,
            owner_chat(data_dir, host_secret, SCOPE, model, EVERY_CHANGE) as chat,
        ):
            added = await chat.command(f"/mcp_add changing {server.url}", owner)
            assert added.startswith("Added changing"), added
            first = await change(chat, owner, 1)
            second = await change(chat, owner, 2)
            assert first.digest and second.digest and first.digest != second.digest

            # The first message's button, pressed after the second was shown: nothing is approved,
            # and the second message, which shows the newest state, is not sent again.
            stale = await chat.command(f"{first.approve} {first.digest}", owner)
            assert stale.startswith("The tools of changing changed again since that message was shown"), stale
            assert "nothing was decided: the newest message shows them" in stale
            assert len(owner.approvals) == 2
            assert await lookup_description(chat, model) is None

            approved = await chat.command(f"{second.approve} {second.digest}", owner)
            assert approved.startswith("Approved 1 tool(s) of changing"), approved
            assert await lookup_description(chat, model) == "[changing] Look up a word, version 2."


async def test_an_approvals_digest_from_before_a_restart_decides_nothing_and_the_change_is_shown_again(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model, owner = RecordingModel(), ScriptedUI()
    with anyio.fail_after(60):
        async with serve_mcp(changing_server()) as server:
            async with owner_chat(data_dir, host_secret, SCOPE, model, EVERY_CHANGE) as chat:
                await chat.command(f"/mcp_add changing {server.url}", owner)
                shown = await change(chat, owner, 1)
                assert shown.changes[0].diff == (
                    'description: "Look up a word." → "Look up a word, version 1."',
                )
            later = ScriptedUI()
            async with owner_chat(data_dir, host_secret, SCOPE, model, EVERY_CHANGE) as chat:
                # The new host no longer knows the approved definition, so it shows the change
                # otherwise: a digest names what was shown, and that view is not shown any more.
                stale = await chat.command(f"{shown.approve} {shown.digest}", later)
                assert stale.startswith(
                    "The tools of changing are shown differently now than that message was shown"
                ), stale
                assert "nothing was decided" in stale
                assert await lookup_description(chat, model) is None
                again = later.approvals[-1]
                assert again.changes[0].diff == ('description is now "Look up a word, version 1."',)
                rejected = await chat.command(f"{again.reject} {again.digest}", later)
                assert rejected.startswith("Rejected 1 tool(s) of changing"), rejected
                assert await lookup_description(chat, model) is None
                twice = await chat.command(f"{again.approve} {again.digest}", later)
                assert twice == "No tool changes of changing wait for a decision."
