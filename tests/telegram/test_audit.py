"""The audit log in Telegram: ``/mcp_audit`` in a group goes to the owner's private chat, and a
member's turn is recorded under the member's id.

The bot runs for real against the fake Bot API; the server is the SDK's own on loopback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servers.echo import echo_server
from servers.python_servers import serve_mcp
from support.telegram import running_bot

from .fake_bot_api import creator, group_chat, user

pytestmark = pytest.mark.anyio


async def test_mcp_audit_in_a_group_goes_to_the_owner_privately_and_a_member_is_refused(
    tmp_path: Path,
) -> None:
    group, owner, member = group_chat(-4101), user(4101), user(4102)
    async with serve_mcp(echo_server("tools")) as served, running_bot(tmp_path) as bot:
        fake = bot.fake
        fake.administrators[group["id"]] = [creator(owner)]
        fake.send(group, f"/mcp_add tools {served.url}", sender=owner)
        await fake.wait_reply(-4101, "Added tools")
        mark = fake.mark()
        fake.send(group, 'tools__echo {"text": "from the member"}', sender=member)
        await fake.wait_reply(-4101, "from the member", after=mark)
        fake.send(group, "/mcp_audit", sender=member)
        await fake.wait_reply(-4101, "Only this chat's owner can use /mcp_audit.", after=mark)
        fake.send(group, "/mcp_audit", sender=owner)
        private = await fake.wait_reply(4101, "record(s) of this chat's audit log", after=mark)
        await fake.wait_reply(
            -4101, "I sent you the latest records of this chat's audit log in our private chat", after=mark
        )
    assert "tool_call sender=4102 server=tools tool=echo outcome=ok" in private.text
    assert "server_added sender" not in private.text and "server_added server=tools" in private.text
    assert not any("tool_call" in text for text in fake.texts(-4101))
    assert not fake.texts(4102)
