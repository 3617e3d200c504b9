"""The asking server (a form, a link, a secret question) added to a chat of the bot running
against the fake Bot API, and what the tests do with the questions it shows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.message import ServerMessageMetadata
from tests.telegram.fake_bot_api import ApiCall, FakeBotApi, creator, private_chat, user

from servers.python_servers import serve_mcp
from support.telegram import Running, running_bot

LINK = "https://login.example.org/consent?state=abc123"


FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "description": "Your name"},
        "colour": {"type": "string", "enum": ["red", "green", "blue"], "default": "green"},
        "subscribe": {"type": "boolean", "title": "Subscribe", "default": False},
        "age": {"type": "integer", "title": "Age", "default": 30},
    },
    "required": ["name"],
}


def asking_server() -> MCPServer:
    server = MCPServer("asking")

    async def ask(ctx: Context, params: types.ElicitRequestParams) -> str:
        context = ctx.request_context
        result = await context.session.send_request(
            types.ElicitRequest(params=params),
            types.ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=context.request_id),
        )
        return "answered: " + result.model_dump_json(by_alias=True, exclude_none=True)

    @server.tool()
    async def form(ctx: Context) -> str:
        """Ask the person to fill in a form."""
        return await ask(
            ctx, types.ElicitRequestFormParams(message="Tell me about you", requested_schema=FORM)
        )

    @server.tool()
    async def link(ctx: Context) -> str:
        """Ask the person to open a link."""
        return await ask(
            ctx, types.ElicitRequestURLParams(message="Please log in", url=LINK, elicitation_id="e1")
        )

    @server.tool()
    async def sign_in(ctx: Context, url: str) -> str:
        """Ask the person to open the link given."""
        return await ask(
            ctx, types.ElicitRequestURLParams(message="Sign in to go on", url=url, elicitation_id="e2")
        )

    @server.tool()
    async def leaky(ctx: Context) -> str:
        """Ask a question that quotes the key the server was sent, in its text and a field's title."""
        key = (ctx.headers or {}).get("x-key", "")
        schema = {"type": "object", "properties": {"ok": {"type": "boolean", "title": f"Keep {key}?"}}}
        return await ask(ctx, types.ElicitRequestFormParams(message=f"I got {key}", requested_schema=schema))

    return server


@asynccontextmanager
async def bot_with_asking_server(tmp_path: Path, chat: dict[str, Any], owner: int) -> AsyncIterator[Running]:
    """The bot, with the asking server added to ``chat`` by its owner."""
    async with serve_mcp(asking_server(), protocols="handshake") as served, running_bot(tmp_path) as bot:
        bot.fake.administrators[chat["id"]] = [creator(user(owner))]
        bot.fake.send(chat, f"/mcp_add asking {served.url}", sender=user(owner))
        await bot.fake.wait_reply(chat["id"], "Added asking")
        yield bot


@asynccontextmanager
async def form_waiting(
    tmp_path: Path, owner: int
) -> AsyncIterator[tuple[FakeBotApi, dict[str, Any], dict[str, Any], int, ApiCall]]:
    """The asking server's form, shown to ``owner`` in their private chat: the fake, the chat, the
    owner, the mark before the form was asked for, and the form as shown."""
    chat, me = private_chat(owner), user(owner)
    async with bot_with_asking_server(tmp_path, chat, owner) as bot:
        mark = bot.fake.mark()
        yield bot.fake, chat, me, mark, await form_shown(bot.fake, chat, me, after=mark)


def files_holding(root: Path, text: str) -> list[Path]:
    """Every file under ``root`` whose bytes hold ``text`` as it is."""
    return [path for path in root.rglob("*") if path.is_file() and text.encode() in path.read_bytes()]


def press(fake: FakeBotApi, shown: ApiCall, label: str, *, sender: dict[str, Any]) -> None:
    """Press a button of the message as it looks now: ``shown`` is its first send or its latest edit."""
    message = shown if shown.method == "sendMessage" else _as_sent(fake, shown)
    fake.press(message, label, sender=sender)


def _as_sent(fake: FakeBotApi, edit: ApiCall) -> ApiCall:
    return ApiCall("sendMessage", edit.params, edit.status, edit.at, int(edit.params["message_id"]))


async def edited(fake: FakeBotApi, shown: ApiCall, contains: str, *, after: int) -> ApiCall:
    """The next edit of the question's message whose text contains ``contains``."""
    return await fake.wait_call(
        "editMessageText",
        after=after,
        message_id=shown.result_id,
        where=lambda call: contains in call.text,
    )


async def form_shown(
    fake: FakeBotApi, chat: dict[str, Any], sender: dict[str, Any], *, after: int
) -> ApiCall:
    """``sender`` calls the asking server's ``form`` in ``chat``: its question, as shown there."""
    fake.send(chat, "asking__form {}", sender=sender)
    return await fake.wait_reply(chat["id"], "asking asks:", after=after)


def url_buttons(call: ApiCall) -> list[str]:
    """The links of a message's URL buttons."""
    markup = call.params.get("reply_markup") or {}
    return [button["url"] for row in markup.get("inline_keyboard", []) for button in row if "url" in button]
