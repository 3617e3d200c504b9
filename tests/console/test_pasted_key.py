"""A private key pasted whole at the hidden prompt: the real ``playa chat``, in a pseudo-terminal
and in a pipe, its model a loopback provider that records what it was sent.

The key's lines are read up to its END line and reach the server as one key; none of them
becomes a chat message, and in a terminal a line pasted along with it is discarded with a notice.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from console.test_questions import Chat, Mode
from playa.console._pem import MAX_PEM_LINES, TOO_LONG
from servers.machine_oauth import machine_oauth_server
from support.client_keys import new_client_key
from support.leaks import leaks
from support.oauth import every_file
from support.providers import DUMMY_KEY, ProviderServer, serve_provider, text

pytestmark = pytest.mark.anyio

ALONG = "a line pasted along with the key 5d1c"
AFTER = "hello once the key is in"


def environment(provider: ProviderServer) -> dict[str, str]:
    return {
        "PLAYA_MODEL": "openai-chat:gpt-5.5",
        "OPENAI_BASE_URL": provider.url,
        "OPENAI_API_KEY": DUMMY_KEY,
        "PLAYA_EGRESS_ALLOW": "127.0.0.1/32",
        "PLAYA_LOG_LEVEL": "DEBUG",
    }


def paste(chat: Chat, text: str) -> None:
    """Write ``text`` to the chat's input at once, as a terminal does a paste."""
    assert chat._write is not None
    os.write(chat._write, text.encode())


@pytest.mark.parametrize("mode", ["pty", "pipe"])
@pytest.mark.parametrize("kind", ["ec", "rsa"])
async def test_a_pasted_private_key_reaches_the_server_whole_and_no_line_of_it_the_model(
    tmp_path: Path, mode: Mode, kind: Literal["ec", "rsa"]
) -> None:
    key, pem, lines = new_client_key(kind)
    stderr = tmp_path / "stderr.log"
    async with (
        serve_provider() as provider,
        machine_oauth_server(client_id="svc", public_key=key.public_key()) as server,
        Chat(mode).running(tmp_path / "data", stderr, environment(provider)) as chat,
    ):
        provider.script(text("noted"))
        chat.say(f"/mcp_add bot {server.url} --client-id svc --grant client-credentials --client-key")
        asked = await chat.wait_for("Send the private key (PEM)")
        if mode == "pty":
            paste(chat, pem + ALONG + "\n")
            added = await chat.wait_for("Added bot: connected", after=asked)
            await chat.wait_for("1 line pasted after the secret was discarded.", after=asked)
            chat.say(AFTER)
        else:
            # A pipe is a script: the line after the key is the next message, as written.
            paste(chat, pem + AFTER + "\n")
            added = await chat.wait_for("Added bot: connected", after=asked)
        await chat.wait_for("noted", after=added)
    assert any("client_assertion=" in request for request in server.home.requests)
    bodies = [request.raw.decode() for request in provider.requests]
    assert len(bodies) == 1 and AFTER in bodies[0]
    assert ALONG not in bodies[0] and ALONG not in chat.out
    log = stderr.read_text()
    assert "HTTP Request" in log  # the DEBUG log is there to be searched
    texts = {"model": bodies[0], "output": chat.raw, "log": log, **every_file(tmp_path / "data")}
    for where, found in texts.items():
        assert leaks([pem.strip(), *lines], found) == [], where


@pytest.mark.parametrize("mode", ["pty", "pipe"])
async def test_a_pem_block_past_the_bound_is_refused_and_nothing_of_it_kept_or_sent(
    tmp_path: Path, mode: Mode
) -> None:
    body = [f"{i:04d}" + "Q" * 60 for i in range(MAX_PEM_LINES + 20)]
    block = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END PRIVATE KEY-----\n"
    stderr = tmp_path / "stderr.log"
    async with (
        serve_provider() as provider,
        machine_oauth_server(
            client_id="svc", public_key=ec.generate_private_key(ec.SECP256R1()).public_key()
        ) as server,
        Chat(mode).running(tmp_path / "data", stderr, environment(provider)) as chat,
    ):
        chat.say(f"/mcp_add bot {server.url} --client-id svc --grant client-credentials --client-key")
        asked = await chat.wait_for("Send the private key (PEM)")
        paste(chat, block)
        await chat.wait_for(TOO_LONG.split(":")[0], after=asked)
        if mode == "pty":
            await chat.wait_for(" pasted after the secret were discarded.", after=asked)
        chat.say("/mcp_list")
        await chat.wait_for("No remote MCP servers", after=asked)
    assert "Added bot" not in chat.out
    log = stderr.read_text()
    for where, found in {"output": chat.raw, "log": log, **every_file(tmp_path / "data")}.items():
        assert not any(line in found for line in body[: MAX_PEM_LINES - 1]), where
    if mode == "pty":
        # What came past the bound was discarded in the terminal, not sent as messages.
        assert provider.requests == []
        assert chat.out.count("you>") < 10
