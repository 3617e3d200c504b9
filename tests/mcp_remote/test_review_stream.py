"""A bounded approval stream: a server that changes its tools again and again gets one message to the owner.

The server is the SDK's own on loopback; each call of its ``change`` tool rewrites what ``lookup``
says (``version N``) and tells its clients. The test waits for each new listing to be taken in
(the chat's ``bound`` event, traced) rather than for time to pass; the approval interval is
judged by the extension's clock, which the test moves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer

from playa.core import render_approval
from playa.mcp_remote import ChatServers, HostSecret, RemoteServer
from playa.mcp_remote.store import Pins
from servers.python_servers import serve_mcp
from support.chat import RecordingModel, ScriptedUI
from support.remote import SETTINGS, owner_chat

pytestmark = pytest.mark.anyio

SCOPE = "console:stream"
TEST_TIMEOUT = 90.0
INTERVAL = 600.0


def lookup(word: str) -> str:
    return f"{word}: a word"


def flapping_server() -> MCPServer:
    server = MCPServer("flapping")
    server.add_tool(lookup, description="Look up a word (version 0).")
    versions = [0]

    @server.tool()
    async def change(ctx: Context) -> str:
        """Rewrite lookup's description once more; tell the clients."""
        versions[0] += 1
        server.remove_tool("lookup")
        server.add_tool(lookup, description=f"Look up a word (version {versions[0]}).")
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return f"version {versions[0]}"

    return server


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Listings:
    """Each listing the chat took in after a change, as an event to wait on."""

    def __init__(self) -> None:
        self.taken = anyio.Event()

    def trace(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = ChatServers.bound

        async def traced(chat: ChatServers, server: RemoteServer, adopted: Pins | None) -> None:
            await original(chat, server, adopted)
            taken, self.taken = self.taken, anyio.Event()
            taken.set()

        monkeypatch.setattr(ChatServers, "bound", traced)

    async def until(self, held: Callable[[], bool]) -> None:
        while True:
            taken = self.taken
            if held():
                return
            await taken.wait()


async def test_a_server_that_keeps_changing_gets_one_message_and_the_owner_approves_what_they_were_shown(
    data_dir: Path, host_secret: HostSecret, monkeypatch: pytest.MonkeyPatch
) -> None:
    listings = Listings()
    listings.trace(monkeypatch)
    clock = Clock()
    model = RecordingModel()
    owner = ScriptedUI()
    settings = replace(SETTINGS, approval_interval=INTERVAL)
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            serve_mcp(flapping_server()) as running,
            owner_chat(data_dir, host_secret, SCOPE, model, settings, clock=clock) as owned,
        ):
            host, extension = owned.host, owned.extension
            session = await host.session(SCOPE, owner="owner")
            chat = extension.chat(session)

            def waiting(version: int) -> Callable[[], bool]:
                def held() -> bool:
                    tool = chat.servers["flapping"].review.held.get("lookup")
                    return tool is not None and f"(version {version})" in (tool.description or "")

                return held

            async def change(version: int) -> None:
                result = await host.call_tool(session, "flapping__change", {})
                assert f"version {version}" in str(result), result
                await listings.until(waiting(version))

            added = await owned.command(f"/mcp_add flapping {running.url}", owner)
            assert added.startswith("Added flapping: connected"), added

            # The first change is told at once; four more, while it is undecided, are not.
            await change(1)
            await owner.approval_shown(1)
            for version in range(2, 6):
                await change(version)
            assert len(owner.approvals) == 1
            assert "(version 1)" in render_approval(owner.approvals[0])
            assert [text for text in owner.sent if "flapping" in text] == []

            # The review shows the newest; approving approves exactly that.
            reviewed = await owned.command("/mcp_review flapping", owner)
            assert "(version 5)" in reviewed and "(version 1)" not in reviewed, reviewed
            await change(6)
            again = await owned.command("/mcp_approve flapping", owner)
            assert again.startswith("The tools of flapping changed again since you were shown them"), again
            assert "(version 6)" in again
            approved = await owned.command("/mcp_approve flapping", owner)
            assert approved == "Approved 1 tool(s) of flapping: lookup. The agent can use them now."
            await owned.say("hello")
            described = {tool.name: tool.description for tool in model.seen[-1][1].function_tools}
            assert "(version 6)" in (described["flapping__lookup"] or "")
            assert len(owner.approvals) == 1

            # Decided: the next change is told at once, and the window starts again.
            await change(7)
            assert len(owner.approvals) == 2 and "(version 7)" in render_approval(owner.approvals[1])
            clock.now += INTERVAL - 1
            await change(8)
            assert len(owner.approvals) == 2
            # Once the interval has passed, the next change brings the newest state.
            clock.now += 1
            await change(9)
            assert len(owner.approvals) == 3
            shown = render_approval(owner.approvals[2])
            assert "(version 9)" in shown and "(version 8)" not in shown
            approved = await owned.command("/mcp_approve flapping", owner)
            assert approved.startswith("Approved 1 tool(s) of flapping"), approved
