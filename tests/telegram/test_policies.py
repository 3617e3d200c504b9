"""A call under ``ask`` in Telegram: buttons in the owner's private chat, whoever's turn made the call.

The bot runs for real against the fake Bot API; the call goes to the SDK's own MCP server on
loopback, made by the offline model, and the server records every call that reaches it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from servers.python_servers import serve_mcp
from support.files import ARGUMENTS, files_server
from support.telegram import running_bot

from .fake_bot_api import ApiCall, FakeBotApi, creator, group_chat, private_chat, user

pytestmark = pytest.mark.anyio

OWNER, MEMBER = 4101, 4102
GROUP = group_chat(-4101)
LABELS = ["Allow once", "Always for this tool", "Deny"]


@asynccontextmanager
async def bot_with_files(
    tmp_path: Path, environ: dict[str, str] | None = None
) -> AsyncIterator[tuple[FakeBotApi, list[dict[str, Any]]]]:
    """The bot, with the files server added to the group by its owner, every call asked: its fake
    Bot API, and the arguments of every call that reached the server."""
    calls: list[dict[str, Any]] = []
    async with serve_mcp(files_server(calls)) as served, running_bot(tmp_path, environ=environ) as bot:
        bot.fake.administrators[GROUP["id"]] = [creator(user(OWNER))]
        bot.fake.send(GROUP, f"/mcp_add files {served.url} --policy ask", sender=user(OWNER))
        await bot.fake.wait_reply(GROUP["id"], "Added files")
        yield bot.fake, calls


def write_call(arguments: dict[str, Any] = ARGUMENTS) -> str:
    return f"files__write {json.dumps(arguments)}"


async def owner_asked(fake: FakeBotApi, *, after: int) -> ApiCall:
    """A member's turn calls the write tool: the owner's permission question, in their private chat."""
    fake.send(GROUP, write_call(), sender=user(MEMBER))
    return await fake.wait_reply(OWNER, "The agent wants to call", after=after)


async def test_a_members_call_waits_for_the_owners_press_in_their_private_chat(tmp_path: Path) -> None:
    async with bot_with_files(tmp_path) as (fake, calls):
        mark = fake.mark()
        fake.send(GROUP, write_call(), sender=user(MEMBER))
        asked = await fake.wait_reply(OWNER, "The agent wants to call the tool write", after=mark)
        assert asked.labels == LABELS
        assert "files" in asked.text and "in " in asked.text and "'s turn" in asked.text
        assert json.dumps(ARGUMENTS, indent=2) in asked.text  # every argument, as the server gets it
        await fake.wait_reply(GROUP["id"], "waits for the owner's permission", after=mark)
        assert not fake.find("sendMessage", after=mark, chat_id=MEMBER)  # nothing to the member

        # The member whose turn it is cannot decide, nor can anyone else.
        fake.press(asked, "Allow once", sender=user(MEMBER))
        refused = await fake.wait_call("answerCallbackQuery", after=mark)
        assert refused.params["text"] == "This button is for someone else."
        assert calls == []

        fake.press(asked, "Allow once", sender=user(OWNER))
        await fake.wait_reply(GROUP["id"], "wrote", after=mark)
        await fake.wait_call(
            "editMessageText", after=mark, where=lambda call: "You allowed this call." in call.text
        )
    assert calls == [ARGUMENTS]


async def test_the_owners_deny_keeps_the_call_from_the_server_and_the_model_learns_it(
    tmp_path: Path,
) -> None:
    async with bot_with_files(tmp_path) as (fake, calls):
        mark = fake.mark()
        asked = await owner_asked(fake, after=mark)
        fake.press(asked, "Deny", sender=user(OWNER))
        await fake.wait_reply(GROUP["id"], "the owner declined", after=mark)
    assert calls == []


async def test_always_for_this_tool_lets_later_calls_through_unasked(tmp_path: Path) -> None:
    async with bot_with_files(tmp_path) as (fake, calls):
        mark = fake.mark()
        asked = await owner_asked(fake, after=mark)
        fake.press(asked, "Always for this tool", sender=user(OWNER))
        await fake.wait_reply(GROUP["id"], "wrote", after=mark)
        mark = fake.mark()
        fake.send(GROUP, write_call({"path": "b", "text": "again"}), sender=user(MEMBER))
        await fake.wait_reply(GROUP["id"], "wrote", after=mark)
        assert not fake.find("sendMessage", after=mark, chat_id=OWNER)
    assert len(calls) == 2


async def test_an_unanswered_call_is_not_made_once_the_ask_timeout_passed(tmp_path: Path) -> None:
    async with bot_with_files(tmp_path, {"PLAYA_ASK_TIMEOUT": "0.5"}) as (fake, calls):
        mark = fake.mark()
        started = time.monotonic()
        fake.send(GROUP, write_call(), sender=user(MEMBER))
        asked = await fake.wait_reply(OWNER, "The agent wants to call", after=mark)
        await fake.wait_reply(GROUP["id"], "the owner did not answer", after=mark)
        waited = time.monotonic() - started
        with anyio.fail_after(30):
            await fake.wait_call(
                "editMessageText",
                after=mark,
                where=lambda call: "No answer came: the call was not made." in call.text,
            )
        # A press after the timeout decides nothing.
        fake.press(asked, "Allow once", sender=user(OWNER))
        await fake.wait_call("answerCallbackQuery", after=mark)
    assert waited >= 0.5
    assert calls == []


async def test_in_the_owners_private_chat_their_own_call_is_asked_there(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []
    chat = private_chat(OWNER)
    async with serve_mcp(files_server(calls)) as served, running_bot(tmp_path) as bot:
        fake = bot.fake
        fake.send(chat, f"/mcp_add files {served.url} --policy ask", sender=user(OWNER))
        mark = fake.mark()
        await fake.wait_reply(OWNER, "Added files")
        fake.send(chat, write_call(), sender=user(OWNER))
        asked = await fake.wait_reply(OWNER, "The agent wants to call the tool write", after=mark)
        assert "'s turn" not in asked.text
        assert calls == []
        fake.press(asked, "Allow once", sender=user(OWNER))
        await fake.wait_reply(OWNER, "wrote", after=mark)
    assert calls == [ARGUMENTS]
