"""``/mcp``: the panel of the chat's servers in a real host against the demo server, and its actions,
each tied by a tag to the server exactly as the panel showed it."""

from __future__ import annotations

import anyio
import pytest

from playa.core import Panel, render_panel
from playa.mcp_remote.commands import build_commands
from servers.python_servers import closed_port
from support.chat import GUEST, ScriptedUI, msg
from support.remote import AddedServer, OwnerChat
from support.rewriting import ORDER, PREFIX, Rewriting

pytestmark = pytest.mark.anyio

TEST_TIMEOUT = 30.0


def carries_secret(args: str) -> bool:
    [command] = [c for c in build_commands(lambda _: None, lambda: 0.0) if c.name == "mcp"]  # type: ignore[arg-type, return-value]
    return command.carries_secret(args)


async def shown_panel(chat: OwnerChat) -> tuple[Panel, str]:
    ui = ScriptedUI()
    reply = await chat.command("/mcp", ui)
    [panel] = ui.panels
    return panel, reply


async def test_the_panel_shows_each_server_with_its_actions_and_the_reply_adds_nothing(
    demo_added: AddedServer, demo_token: str, chat: OwnerChat
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with closed_port() as refused:
            await chat.command(f"/mcp_add down {refused} --bearer {demo_token}x")
            panel, reply = await shown_panel(chat)
    assert reply == ""  # shown to the owner already: the console and a private chat get one message
    demo_row, down_row = panel.rows
    assert (demo_row.title, down_row.title) == ("demo", "down")
    assert demo_row.state.startswith("connected")
    assert down_row.state.startswith("unavailable")
    assert [a.label for a in demo_row.actions] == ["Reconnect demo", "Tools of demo", "Remove demo"]
    assert [a.label for a in down_row.actions] == ["Reconnect down", "Remove down"]
    remove = demo_row.actions[-1]
    assert remove.confirm is not None and remove.changes
    assert not demo_row.actions[1].changes
    # Every action is a command naming the server and its tag, and never a credential.
    for action in (*demo_row.actions, *down_row.actions):
        verb, name, tag = action.command.removeprefix("/mcp ").split()
        assert not carries_secret(f"{verb} {name} {tag}")
    text = render_panel(panel)
    assert demo_token not in text
    assert "/mcp remove demo " in text


async def test_an_action_runs_on_the_server_shown(demo_added: AddedServer, chat: OwnerChat) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        panel, _ = await shown_panel(chat)
        actions = panel.rows[0].actions
        reconnect, tools, remove = actions[0].command, actions[1].command, actions[-1].command
        assert "demo__echo" in await chat.command(tools)
        assert (await chat.command(reconnect)).startswith("demo: connected")
        # A tag that was never shown does nothing.
        tag = remove.split()[-1]
        assert "nothing was done" in await chat.command(f"/mcp remove demo {'0' * len(tag)}")
        assert "Removed demo" in await chat.command(remove)


async def test_an_action_of_a_panel_shown_before_the_server_was_replaced_does_nothing(
    chat: OwnerChat,
) -> None:
    # Servers that never connect: nothing of the first one is saved behind the replacement's back.
    with anyio.fail_after(TEST_TIMEOUT):
        async with closed_port() as first, closed_port() as second:
            await chat.command(f"/mcp_add docs {first}")
            panel, _ = await shown_panel(chat)
            remove = panel.rows[0].actions[-1].command
            assert (await chat.command(f"/mcp_add docs {second}")).startswith("Replaced docs")
            refused = await chat.command(remove)
            assert "nothing was done" in refused
            assert "Send /mcp" in refused
            listed = await chat.command("/mcp_list")
            assert second.split("//")[1] in listed  # the new one is still there

            # The panel as it is now acts.
            panel, _ = await shown_panel(chat)
            assert "Removed docs" in await chat.command(panel.rows[0].actions[-1].command)


async def test_only_the_owner_gets_a_panel_or_runs_its_actions(
    demo_added: AddedServer, chat: OwnerChat
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        panel, _ = await shown_panel(chat)
        ui = ScriptedUI()
        session = await chat.session()
        guest = await chat.host.handle(session, msg("/mcp", sender=GUEST), ui)
        removal = await chat.host.handle(session, msg(panel.rows[0].actions[-1].command, sender=GUEST), ui)
    assert guest is not None and "Only this chat's owner" in guest.text
    assert removal is not None and "Only this chat's owner" in removal.text
    assert ui.panels == []
    assert "demo:" in await chat.command("/mcp_list")


@pytest.mark.parametrize(
    ("args", "secret"),
    [
        ("", False),
        ("remove demo 0123456789ab", False),
        ("remove demo sk-proj-Q7vR2mXk9LpT4wZs8NcB", True),
        ("hunter2hunter2hunter2", True),
        ("remove demo", True),
        ("drop demo 0123456789ab", True),
    ],
)
def test_what_is_not_a_panels_action_is_treated_as_a_possible_key(args: str, secret: bool) -> None:
    assert carries_secret(args) is secret


async def test_a_server_whose_changes_wait_offers_review_and_the_action_shows_them(
    rewriting: Rewriting,
) -> None:
    with anyio.fail_after(60.0):
        assert await rewriting.rewrite(description=PREFIX + ORDER) is not None
        panel, _ = await shown_panel(rewriting.chat)
        [row] = panel.rows
        assert "wait for the owner's approval" in row.state
        [review] = [a for a in row.actions if a.label == "Review rewriting"]
        assert not review.changes  # it only shows: the panel stays
        shown = await rewriting.chat.command(review.command, rewriting.owner)
    assert ORDER.strip() in shown
    assert "/mcp_approve rewriting" in shown
