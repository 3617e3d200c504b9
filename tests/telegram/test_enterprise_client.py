"""An enterprise grant's ID token in Telegram: asked in secret, its message deleted, and never in
anything the bot sends or logs; the command that carried the client secret is deleted too."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from servers.enterprise_oauth import CLIENT_ID, IDP_CLIENT_ID, enterprise_oauth_server
from support.leaks import leaks
from support.oauth import every_file
from support.telegram import running_bot, sent_texts

from .fake_bot_api import private_chat, user

pytestmark = pytest.mark.anyio

TEST_TIMEOUT = 120.0
SECRET = "cs-" + "Jp7Tx2Mv9Qa4Hs6Wd1Ze3Kc8"


async def test_the_id_token_is_asked_in_secret_deleted_and_shown_nowhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(TEST_TIMEOUT):
        async with enterprise_oauth_server(secret=SECRET) as server, running_bot(tmp_path) as bot:
            fake, chat, me = bot.fake, private_chat(5102), user(5102)
            mark = fake.mark()
            command = fake.send(
                chat,
                f"/mcp_add corp {server.url} --client-id {CLIENT_ID} --client-secret {SECRET} "
                f"--grant enterprise --idp {server.idp} --idp-client-id {IDP_CLIENT_ID} --id-token",
                sender=me,
            )
            await fake.wait_call("deleteMessage", after=mark, chat_id=5102, message_id=command)
            question = await fake.wait_reply(5102, "Send your ID token from")
            assert "I delete your message" in question.text
            mark = fake.mark()
            answer = fake.send(chat, server.id_token, sender=me)
            await fake.wait_call("deleteMessage", after=mark, chat_id=5102, message_id=answer)
            added = await fake.wait_reply(5102, "Added corp", after=mark)
            assert "connected" in added.text, added.text
            assert len(server.idp_requests) == 1 and server.jags

    seen = {"sent": "\n".join(sent_texts(fake)), "log": caplog.text, **every_file(tmp_path)}
    for where, text in seen.items():
        assert leaks([server.id_token, SECRET, *server.jags], text) == [], where
