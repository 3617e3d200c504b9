"""The /mcp panel on Telegram: one message to the owner with the chat's servers and a button per action,
honoured only from the owner and only on the server it showed.

The bot runs for real against the fake Bot API, with the demo MCP server on loopback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from servers.python_servers import closed_port
from support.telegram import DEMO_TOKEN, Running, demo_added, running_bot

from .fake_bot_api import ApiCall, owned_group, private_chat, user

pytestmark = pytest.mark.anyio

ONLY_OWNER = "Only the chat's owner can use this panel."
EXPIRED = "This button no longer does anything."
STALE = "nothing was done"


async def panel_shown(
    bot: Running, chat: dict[str, object], owner: int, *, sender: int | None = None
) -> ApiCall:
    """``/mcp`` sent in ``chat``; the panel message the owner got in their private chat."""
    mark = bot.fake.mark()
    bot.fake.send(chat, "/mcp", sender=user(sender or owner))
    return await bot.fake.wait_call(
        "sendMessage", after=mark, chat_id=owner, where=lambda c: "reply_markup" in c.params
    )


@asynccontextmanager
async def demo_panel(tmp_path: Path, owner: int) -> AsyncIterator[tuple[Running, ApiCall]]:
    """The bot, with the demo server added in ``owner``'s private chat, and the panel ``/mcp`` shows there."""
    async with running_bot(tmp_path) as bot:
        await demo_added(bot, owner)
        yield bot, await panel_shown(bot, private_chat(owner), owner)


async def answered(bot: Running, after: int) -> str:
    return str((await bot.fake.wait_call("answerCallbackQuery", after=after)).params.get("text", ""))


async def test_the_owner_sees_each_servers_state_and_acts_on_it_from_one_message(tmp_path: Path) -> None:
    async with demo_panel(tmp_path, 201) as (bot, shown):
        fake = bot.fake
        assert "demo: connected" in shown.text
        assert DEMO_TOKEN not in shown.text
        assert shown.labels == ["Reconnect demo", "Tools of demo", "Remove demo"]
        # One message, and nothing else: the panel is the reply.
        assert len(fake.find("sendMessage", after=fake.calls.index(shown) + 1, chat_id=201)) == 0

        # Tools only shows: its answer comes beside the panel, whose buttons stay.
        mark = fake.mark()
        fake.press(shown, "Tools of demo", sender=user(201))
        tools = await fake.wait_reply(201, "demo__whoami", after=mark)
        assert "reply_markup" not in tools.params

        # Remove asks first, in the panel's own message; "Keep it" puts the panel back.
        mark = fake.mark()
        fake.press(shown, "Remove demo", sender=user(201))
        asked = await fake.wait_call("editMessageText", after=mark, chat_id=201)
        assert "Remove demo?" in asked.text
        assert asked.labels == ["Remove demo", "Keep it"]
        mark = fake.mark()
        fake.press(asked, "Keep it", sender=user(201))
        back = await fake.wait_call("editMessageText", after=mark, chat_id=201)
        assert back.labels == shown.labels

        mark = fake.mark()
        fake.press(back, "Remove demo", sender=user(201))
        asked = await fake.wait_call("editMessageText", after=mark, chat_id=201)
        mark = fake.mark()
        fake.press(asked, "Remove demo", sender=user(201))
        done = await fake.wait_call(
            "editMessageText", after=mark, chat_id=201, where=lambda c: "Removed demo" in c.text
        )
        assert not done.labels  # spent: the panel showed a server that is gone

        mark = fake.mark()
        fake.send(private_chat(201), "/mcp_list", sender=user(201))
        await fake.wait_reply(201, "No remote MCP servers", after=mark)


async def test_reconnect_connects_the_server_again_and_the_panel_says_how_it_went(tmp_path: Path) -> None:
    async with demo_panel(tmp_path, 202) as (bot, shown):
        fake = bot.fake
        mark = fake.mark()
        fake.press(shown, "Reconnect demo", sender=user(202))
        done = await fake.wait_call("editMessageText", after=mark, chat_id=202)
        assert done.text.startswith("demo: connected")
        assert not done.labels


async def test_a_groups_panel_goes_to_the_owner_alone_and_a_member_cannot_press_it(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake, group = bot.fake, owned_group(bot.fake, -2301, 2302)
        mark = fake.mark()
        fake.send(group, f"/mcp_add demo {bot.mcp_url} --bearer {DEMO_TOKEN}", sender=user(2302))
        await fake.wait_reply(-2301, "Added demo", after=mark)

        mark = fake.mark()
        shown = await panel_shown(bot, group, 2302)
        note = await fake.wait_reply(-2301, "our private chat", after=mark)
        assert "reply_markup" not in note.params
        # The group never sees the panel itself.
        assert not [c for c in fake.find("sendMessage", after=mark, chat_id=-2301) if c.labels]

        # A member pressing a button of the owner's message (forwarded, say) is refused.
        mark = fake.mark()
        fake.press(shown, "Remove demo", sender=user(2303))
        assert await answered(bot, mark) == ONLY_OWNER
        assert not fake.find("editMessageText", after=mark)

        # A member's /mcp is refused as every owner's command is: no panel is sent to anyone.
        mark = fake.mark()
        fake.send(group, "/mcp", sender=user(2303))
        await fake.wait_reply(-2301, "Only this chat's owner", after=mark)
        assert not [c for c in fake.find("sendMessage", after=mark) if c.labels]

        # The owner's press acts on the group's servers.
        mark = fake.mark()
        fake.press(shown, "Remove demo", sender=user(2302))
        asked = await fake.wait_call("editMessageText", after=mark, chat_id=2302)
        fake.press(asked, "Remove demo", sender=user(2302))
        await fake.wait_call(
            "editMessageText", after=mark, chat_id=2302, where=lambda c: "Removed demo" in c.text
        )
        await fake.wait_reply(-2301, "removed the remote MCP server demo", after=mark)


async def test_a_button_of_a_panel_shown_before_the_server_was_replaced_does_not_act_on_the_new_one(
    tmp_path: Path,
) -> None:
    # Servers that never connect: nothing of the first one is saved behind the replacement's back.
    async with running_bot(tmp_path) as bot, closed_port() as first, closed_port() as second:
        fake, chat = bot.fake, private_chat(204)
        mark = fake.mark()
        fake.send(chat, f"/mcp_add docs {first}", sender=user(204))
        await fake.wait_reply(204, "Added docs", after=mark)
        shown = await panel_shown(bot, chat, 204)

        # Replaced behind the panel's back: another server by the same name.
        mark = fake.mark()
        fake.send(chat, f"/mcp_add docs {second}", sender=user(204))
        await fake.wait_reply(204, "Replaced docs", after=mark)

        mark = fake.mark()
        fake.press(shown, "Remove docs", sender=user(204))
        asked = await fake.wait_call("editMessageText", after=mark, chat_id=204)
        fake.press(asked, "Remove docs", sender=user(204))
        refused = await fake.wait_call(
            "editMessageText", after=mark, chat_id=204, where=lambda c: STALE in c.text
        )
        assert "Send /mcp" in refused.text

        mark = fake.mark()
        fake.send(chat, "/mcp_list", sender=user(204))
        listed = await fake.wait_reply(204, "docs:", after=mark)
        assert second.split("//")[1] in listed.text  # the new server is still there


async def test_a_newer_panel_takes_the_older_ones_buttons_away(tmp_path: Path) -> None:
    async with demo_panel(tmp_path, 205) as (bot, first):
        fake = bot.fake
        mark = fake.mark()
        second = await panel_shown(bot, private_chat(205), 205)
        superseded = await fake.wait_call(
            "editMessageText", after=mark, chat_id=205, message_id=first.result_id
        )
        assert "newer panel" in superseded.text
        assert second.result_id != first.result_id

        mark = fake.mark()
        fake.press(first, "Remove demo", sender=user(205))
        assert await answered(bot, mark) == EXPIRED
        assert not [c for c in fake.find("editMessageText", after=mark) if "Remove demo?" in c.text]
