"""A machine client's private key in Telegram: asked in secret, taken whole from one message,
deleted, and never in anything the bot sends or logs."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from servers.machine_oauth import machine_oauth_server
from support.client_keys import new_client_key
from support.leaks import leaks
from support.oauth import every_file
from support.telegram import running_bot, sent_texts

from .fake_bot_api import private_chat, user

pytestmark = pytest.mark.anyio

TEST_TIMEOUT = 120.0


async def test_the_client_key_is_asked_in_secret_deleted_and_shown_nowhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key, pem, lines = new_client_key()
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            machine_oauth_server(client_id="svc", public_key=key.public_key()) as server,
            running_bot(tmp_path) as bot,
        ):
            fake, chat, me = bot.fake, private_chat(5101), user(5101)
            fake.send(
                chat,
                f"/mcp_add bot {server.url} --client-id svc --grant client-credentials --client-key",
                sender=me,
            )
            question = await fake.wait_reply(5101, "Send the private key (PEM)")
            assert "I delete your message" in question.text
            mark = fake.mark()
            answer = fake.send(chat, pem, sender=me)  # the whole key, line breaks and all
            await fake.wait_call("deleteMessage", after=mark, chat_id=5101, message_id=answer)
            added = await fake.wait_reply(5101, "Added bot", after=mark)
            assert "connected" in added.text, added.text
            assert any("client_assertion=" in request for request in server.home.requests)

    seen = {"sent": "\n".join(sent_texts(fake)), "log": caplog.text, **every_file(tmp_path)}
    for where, text in seen.items():
        assert leaks([pem.strip(), *lines], text) == [], where
