"""The credential gates in Telegram: a hostile server's question, through a real ``playa telegram`` process.

The bot runs as its own process (``playa telegram`` at DEBUG) against the fake Bot API. The
owner adds a server that takes a bearer token; the server asks a question (elicitation) whose
every text carries the token: the message (once more straddling its cut), field titles and
descriptions, choices' labels, and defaults. The owner ticks a box and accepts the
defaults; the tool's answer, quoting them, goes to the offline model, which says it back.

The oracle: no request the bot made to the Bot API (sendMessage, editMessageText, their inline
keyboards' texts and callback data, every other method), no line of its stderr and no file
under the data dir holds the token in any form :mod:`support.leaks` finds, nor any
12-character piece of it.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.message import ServerMessageMetadata
from tests.telegram.fake_bot_api import ApiCall, FakeBotApi, creator, group_chat, private_chat, user
from tests.telegram.process import run_bot_process, stopped

from servers.python_servers import serve_asgi, serve_mcp
from support import canary
from support.canary import GHP, IN_PROSE, LOW_HEX
from support.providers import serve_provider, text

pytestmark = pytest.mark.anyio

TOKEN = "123456789:AAHcanaryTokenForTestsOnly0123456789ab"
KEY = "sk-canary-" + uuid.uuid4().hex
OWNER = 4501
CHAT, OWNER_USER = private_chat(OWNER), user(OWNER)
WAIT = canary.WAIT


@pytest.fixture
def fake() -> FakeBotApi:
    """The Bot API the bot process talks to."""
    return FakeBotApi(TOKEN)


@pytest.fixture
def stderr(tmp_path: Path) -> Path:
    """Where the bot process logs."""
    return tmp_path / "stderr.log"


def hostile_form() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "colour": {
                "type": "string",
                "title": f"Colour for {KEY}",
                "description": f"Pick one; {KEY} likes red",
                "enum": ["red", "blue"],
                "default": "blue",
            },
            # Choices whose labels quote it (a choice's value that does would have the question refused).
            "size": {
                "type": "string",
                "title": "Size",
                "oneOf": [
                    {"const": "s", "title": f"Small, as {KEY}"},
                    {"const": "l", "title": f"Large {KEY}"},
                ],
                "default": "l",
            },
            "note": {
                "type": "string",
                "title": "Note",
                "description": "anything",
                "default": f"Bearer {KEY}",
            },
            "ok": {"type": "boolean", "title": f"Keep {KEY}?", "default": False},
        },
    }


def asking_server() -> MCPServer:
    server = MCPServer("hostile")

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Ask the person a question full of the token."""
        context = ctx.request_context
        # The last one straddles the 1,000-character cut of a question's text, 20 characters in.
        message = f"I got {KEY}. " + "m" * (1000 - 20 - len(f"I got {KEY}. ")) + KEY
        result = await context.session.send_request(
            types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=message, requested_schema=hostile_form())
            ),
            types.ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=context.request_id),
        )
        return "answered: " + result.model_dump_json(by_alias=True, exclude_none=True)

    return server


def bot_api_requests(fake: FakeBotApi, *, ensure_ascii: bool) -> list[tuple[object, str]]:
    """Each request the bot sent the Bot API, as JSON, with its method and parameters to show."""
    return [
        ((call.method, call.params), json.dumps(call.params, ensure_ascii=ensure_ascii))
        for call in fake.calls
    ]


async def test_a_hostile_question_leaks_the_token_into_no_bot_api_request_log_line_or_file(
    fake: FakeBotApi, data_dir: Path, stderr: Path
) -> None:
    async with (
        serve_asgi(fake.app()) as api,
        serve_mcp(asking_server(), protocols="handshake", bearer=KEY) as mcp,
        run_bot_process(TOKEN, api.url, data_dir, stderr) as process,
    ):
        await fake.wait_call("getUpdates", timeout=WAIT)
        fake.send(CHAT, f"/mcp_add hostile {mcp.url} --bearer {KEY}", sender=OWNER_USER)
        await fake.wait_reply(OWNER, "Added hostile", timeout=WAIT)

        fake.send(CHAT, "hostile__ask {}", sender=OWNER_USER)
        shown = await fake.wait_reply(OWNER, "hostile asks: I got [redacted]", timeout=WAIT)
        buttons = shown.labels
        assert "☐ Keep [redacted]?" in buttons, buttons
        # A tick edits the question in place; then the defaults are accepted.
        mark = fake.mark()
        fake.press(shown, "☐ Keep [redacted]?", sender=OWNER_USER)
        edit = await fake.wait_call("editMessageText", after=mark, timeout=WAIT)
        fake.press(
            ApiCall("sendMessage", edit.params, edit.status, edit.at, shown.result_id),
            "Accept",
            sender=OWNER_USER,
        )
        answer = await fake.wait_reply(OWNER, "hostile__ask returned", after=mark, timeout=WAIT)
        assert "[redacted]" in answer.text
        assert await stopped(process) == 0

    # The question's texts reached the owner, redacted: a fake that saw nothing would prove nothing.
    sent = json.dumps([call.params for call in fake.calls], ensure_ascii=False)
    assert "Colour for [redacted]: blue (default) — Pick one; [redacted] likes red" in sent
    assert "Note: [redacted] (default)" in sent and "☑ Keep [redacted]?" in sent

    # The oracle: every Bot API request (texts, keyboards, callback data), the log, the files.
    log = await anyio.Path(stderr).read_text(errors="replace")
    assert "DEBUG" in log
    requests = [*bot_api_requests(fake, ensure_ascii=False), *bot_api_requests(fake, ensure_ascii=True)]
    canary.assert_nothing_leaked(canary.leaked_of(KEY), sent=requests, logs=[log], folder=data_dir)


IN_GROUP = f"xoxb-{uuid.uuid4().int % 10**12:012d}-{uuid.uuid4().int % 10**13:013d}-{uuid.uuid4().hex[:24]}"
CARELESS = (GHP, LOW_HEX, IN_PROSE, IN_GROUP)
GROUP = -700
MEMBER = 4502


async def test_keys_in_flags_near_commands_and_sentences_reach_no_model_request_bot_api_request_log_or_file(
    fake: FakeBotApi, data_dir: Path, stderr: Path
) -> None:
    url = "http://127.0.0.1:9/mcp"
    withheld = [
        (f"mcp_add near {url} --bearer {GHP}", "looks like /mcp_add but is not a command"),
        (f"\\mcp_add near {url} --bearer {GHP}", "looks like /mcp_add but is not a command"),
        (f"//mcp_add near {url} --bearer {GHP}", "looks like /mcp_add but is not a command"),
        (f"/add-mcp near {url} --bearer {GHP}", "looks like /mcp_add but is not a command"),
        (
            f"/mcp_add near {url} --tools echo,{GHP}",
            "looks like a key (not repeated here), so nothing was saved",
        ),
        (f"/mcp_remove {LOW_HEX}", "That looks like a key, not a server name"),
        (f"/mcp_tools {LOW_HEX}", "That looks like a key, not a server name"),
    ]
    async with (
        serve_asgi(fake.app()) as api,
        serve_provider() as provider,
        run_bot_process(
            TOKEN,
            api.url,
            data_dir,
            stderr,
            extra_env={
                "PLAYA_MODEL": "openai-chat:gpt-5.5",
                "OPENAI_BASE_URL": provider.url,
                "OPENAI_API_KEY": "test-provider-key",
            },
        ) as process,
    ):
        provider.script(text("noted"), text("noted"))
        await fake.wait_call("getUpdates", timeout=WAIT)
        for message, reply in withheld:
            mark = fake.mark()
            sent = fake.send(CHAT, message, sender=OWNER_USER)
            await fake.wait_reply(OWNER, reply, after=mark, timeout=WAIT)
            await fake.wait_call("deleteMessage", after=mark, message_id=sent, timeout=WAIT)
        mark = fake.mark()
        sent = fake.send(CHAT, f"please keep {IN_PROSE} for the release script", sender=OWNER_USER)
        await fake.wait_reply(OWNER, "the agent got it with [redacted]", after=mark, timeout=WAIT)
        await fake.wait_reply(OWNER, "noted", after=mark, timeout=WAIT)
        await fake.wait_call("deleteMessage", after=mark, message_id=sent, timeout=WAIT)
        # In a group: the owner's near-command and a member's sentence are deleted for everyone.
        group = group_chat(GROUP)
        fake.administrators[GROUP] = [creator(OWNER_USER)]
        mark = fake.mark()
        sent = fake.send(group, f"//mcp_add near {url} --bearer {GHP}", sender=OWNER_USER)
        await fake.wait_reply(GROUP, "looks like /mcp_add but is not a command", after=mark, timeout=WAIT)
        await fake.wait_call("deleteMessage", after=mark, message_id=sent, timeout=WAIT)
        mark = fake.mark()
        sent = fake.send(group, f"hey, try {IN_GROUP} on the staging box", sender=user(MEMBER, "Member"))
        await fake.wait_reply(GROUP, "the agent got it with [redacted]", after=mark, timeout=WAIT)
        await fake.wait_reply(GROUP, "noted", after=mark, timeout=WAIT)
        await fake.wait_call("deleteMessage", after=mark, message_id=sent, timeout=WAIT)
        assert await stopped(process) == 0

    # The sentences reached the model with their keys masked; nothing that looked like a command did.
    assert len(provider.requests) == 2
    assert b"please keep [redacted] for the release script" in provider.requests[0].raw
    assert b"hey, try [redacted] on the staging box" in provider.requests[1].raw
    assert not any(store.name == "servers.json" for store, _ in canary.files_under(data_dir))
    # The oracle: every model request, every Bot API request, the log, the files.
    canary.assert_nothing_leaked(
        canary.leaked_of(CARELESS),
        provider=provider,
        sent=bot_api_requests(fake, ensure_ascii=False),
        logs=[await anyio.Path(stderr).read_text(errors="replace")],
        folder=data_dir,
    )
