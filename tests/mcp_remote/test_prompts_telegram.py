"""A group's members run its servers' prompts through the Telegram bot (the fake Bot API on
loopback), and the model gets what the member ran, framed as the server's text."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from tests.telegram.fake_bot_api import FakeBotApi, creator, group_chat, user

from playa.mcp_remote import HostSecret
from servers.python_servers import serve_asgi, serve_mcp
from support.providers import serve_provider, text
from support.remote import remote_host
from support.telegram import TOKEN, bot_running

from .test_prompts import prompt_server

pytestmark = pytest.mark.anyio

GROUP, OWNER, MEMBER = -1501, 1502, 1503


async def test_a_group_member_lists_and_runs_a_prompt_answering_its_question(
    data_dir: Path, host_secret: HostSecret
) -> None:
    fake = FakeBotApi(TOKEN)
    fake.administrators[GROUP] = [creator(user(OWNER))]
    with anyio.fail_after(90):
        async with (
            serve_asgi(fake.app()) as api,
            serve_mcp(prompt_server()) as served,
            serve_provider() as provider,
            remote_host(data_dir, host_secret, provider.model("openai-chat")) as host,
            bot_running(fake, host, api.url),
        ):
            fake.send(group_chat(GROUP), f"/mcp_add notes {served.url}", sender=user(OWNER))
            await fake.wait_reply(GROUP, "Added notes")
            mark = fake.mark()
            fake.send(group_chat(GROUP), "/prompts", sender=user(MEMBER))
            listed = await fake.wait_reply(GROUP, "notes:", after=mark)
            assert "greet <name>" in listed.text and "review <language> [code]" in listed.text

            provider.script(text("Reviewed, Bo."))
            mark = fake.mark()
            fake.send(group_chat(GROUP), "/prompt notes review", sender=user(MEMBER))
            asked = await fake.wait_reply(GROUP, "needs language", after=mark)
            assert "For example: python, go, rust." in asked.text
            fake.send(group_chat(GROUP), "rust", sender=user(MEMBER))
            await fake.wait_reply(GROUP, "Reviewed, Bo.", after=mark)
            request = provider.requests[-1].raw.decode()
            assert "Review this rust code: (none given)" in request
            assert "The person ran /prompt notes review with language=rust." in request
    fake.close()
