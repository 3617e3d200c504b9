"""Machine clients (the client-credentials grant) through the real chat: no login, the owner's
secret or private key sealed and shown nowhere, and none of it ever sent to an authorization
server other than the one the client was first used with.

Against ``servers.machine_oauth``: an MCP server whose metadata can be switched to name another
authorization server, both on loopback, each keeping every token request it received.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import pytest

from playa.mcp_remote import HostSecret
from servers.machine_oauth import INSTRUCTION, MachineServer, machine_oauth_server
from support.chat import ScriptedUI
from support.client_keys import new_client_key
from support.leaks import leaks
from support.oauth import every_file
from support.remote import OwnerChat, owner_chat

pytestmark = [pytest.mark.anyio]

TEST_TIMEOUT = 90.0
SCOPE = "console:machines"
SECRET = "cs-" + "q7Vd2kP9xLm4Rt8Zw3Ny6Bh1"


def _assert_nowhere(values: list[str], data_dir: Path, *texts: str) -> None:
    channels = {**every_file(data_dir), **{f"reply {i}": text for i, text in enumerate(texts)}}
    assert any(where.endswith("servers.json") for where in channels)  # sealed there, not in clear
    for where, seen in channels.items():
        assert leaks(values, seen) == [], where


@dataclass
class SecretClient:
    """The owner's chat, and the server it added as ``bot`` with the client id and secret."""

    server: MachineServer
    chat: OwnerChat
    added: str
    """The reply to the ``/mcp_add``."""


@pytest.fixture
async def secret_client(data_dir: Path, host_secret: HostSecret) -> AsyncIterator[SecretClient]:
    async with (
        machine_oauth_server(client_id="svc", secret=SECRET) as server,
        owner_chat(data_dir, host_secret, SCOPE) as chat,
    ):
        with anyio.fail_after(TEST_TIMEOUT):
            added = await chat.command(
                f"/mcp_add bot {server.url} --client-id svc --client-secret {SECRET} --grant client-credentials"
            )
        assert added.startswith("Added bot: connected"), added
        yield SecretClient(server, chat, added)


async def test_a_machine_client_connects_without_a_login_and_its_secret_shows_nowhere(
    data_dir: Path, secret_client: SecretClient
) -> None:
    server, chat, added = secret_client.server, secret_client.chat, secret_client.added
    with anyio.fail_after(TEST_TIMEOUT):
        assert "login" not in added
        called = await chat.command("bot__whoami")
        assert "returned:\na machine" in called, called
        assert server.home.requests and all(
            "grant_type=client_credentials" in r for r in server.home.requests
        )
        ui = ScriptedUI()
        auth = await chat.command("/mcp_auth bot", ui)
        assert auth.startswith("bot needs no login"), auth
        assert ui.private == []  # no link to sign in anywhere
        _assert_nowhere([SECRET], data_dir, added, called, auth)


async def test_a_server_that_names_another_authorization_server_gets_none_of_the_clients_credentials(
    secret_client: SecretClient,
) -> None:
    server, chat = secret_client.server, secret_client.chat
    with anyio.fail_after(TEST_TIMEOUT):
        server.move_to_elsewhere()
        # The call that finds the move fails; the one after reconnects, and says why it cannot.
        called = [await chat.command("bot__whoami") for _ in range(2)]
        assert not any("returned" in reply for reply in called), called
        assert server.elsewhere.requests == []  # not even a token request without the secret
        listed = await chat.command("/mcp_list")
        shown = "\n".join([*called, listed])
        assert "names another authorization server than the one its client was registered with" in shown, (
            shown
        )
        assert "new credentials with /mcp_add bot" in shown and "/mcp_auth" not in shown, shown


@pytest.mark.parametrize("kind", ["ec", "rsa"])
async def test_a_machine_client_signs_with_the_owners_key_asked_in_secret(
    data_dir: Path, host_secret: HostSecret, kind: Literal["ec", "rsa"]
) -> None:
    key, pem, lines = new_client_key(kind)
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            machine_oauth_server(client_id="svc", public_key=key.public_key()) as server,
            owner_chat(data_dir, host_secret, SCOPE) as chat,
        ):
            ui = ScriptedUI(answers=["".join(pem.splitlines())])
            added = await chat.command(
                f"/mcp_add bot {server.url} --client-id svc --grant client-credentials --client-key", ui
            )
            assert added.startswith("Added bot: connected"), added
            ((question, secret),) = ui.asked
            assert secret and "private key" in question
            called = await chat.command("bot__whoami")
            assert "returned:\na machine" in called, called
            assert any("client_assertion=" in request for request in server.home.requests)
            _assert_nowhere([pem.strip(), *lines], data_dir, added, called, *ui.sent)


async def test_refused_credentials_are_told_in_fixed_words_never_the_authorization_servers(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            machine_oauth_server(client_id="svc", secret=SECRET, refuse=True) as server,
            owner_chat(data_dir, host_secret, SCOPE) as chat,
        ):
            added = await chat.command(
                f"/mcp_add bot {server.url} --client-id svc --client-secret {shlex.quote(SECRET)} --grant client-credentials"
            )
            listed = await chat.command("/mcp_list")
            shown = added + listed
            assert "refused the client's credentials (invalid_client)" in shown, shown
            assert INSTRUCTION not in shown and "SYSTEM" not in shown
            assert "new credentials with /mcp_add bot" in shown, shown
            _assert_nowhere([SECRET], data_dir, added, listed)
