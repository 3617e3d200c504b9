"""DPoP through the real chat: tokens bound to a key of the grant's own, every request proven
with a fresh proof (and the servers' nonces), the key sealed and shown nowhere, and bearer
tokens as before for a server that does not take DPoP.

Against ``servers.machine_oauth`` with ``dpop``: its authorization server binds tokens to the
proof's key and its MCP server takes a bound token only with a proof of that key, each checked
with PyJWT (``servers.dpop_checks``), apart from Playa's own signing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from playa.mcp_remote import HostSecret
from servers.machine_oauth import machine_oauth_server
from support.leaks import leaks
from support.oauth import every_file
from support.remote import owner_chat

pytestmark = [pytest.mark.anyio]

TEST_TIMEOUT = 90.0
SCOPE = "console:dpop"
SECRET = "cs-" + "Hn4Wq8Zt1Vb6Ky3Pm9Rx2Lc5"
ADD = "/mcp_add bot {url} --client-id svc --client-secret " + SECRET + " --grant client-credentials"


@pytest.mark.parametrize("nonce", [False, True], ids=["plain", "nonces"])
async def test_tokens_are_bound_to_the_grants_key_and_every_request_proves_it(
    data_dir: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture, nonce: bool
) -> None:
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            machine_oauth_server(client_id="svc", secret=SECRET, dpop=True, nonce=nonce) as server,
            owner_chat(data_dir, host_secret, SCOPE) as chat,
        ):
            added = await chat.command(ADD.format(url=server.url))
            assert added.startswith("Added bot: connected"), (added, server.resource_proofs.refusals)
            called = await chat.command("bot__whoami")
            assert "returned:\na machine" in called, called
            assert server.bound and server.token_proofs.passed >= 1
            assert server.resource_proofs.passed >= 2 and server.resource_proofs.refusals == []
            assert server.bearer_refused == 0
            if nonce:
                # Each server asked once for its nonce, and every proof after carried it.
                assert server.token_proofs.challenged == 1 and server.token_proofs.honoured >= 1
                assert server.resource_proofs.challenged == 1 and server.resource_proofs.honoured >= 2

            session = await chat.session()
            held = chat.extension.chat(session).servers["bot"].login.grant
            assert held is not None and held.grant.dpop_bound and held.grant.dpop_key
            key = held.grant.dpop_key
            channels = {**every_file(data_dir), "add": added, "call": called, "log": caplog.text}
            for where, seen in channels.items():
                assert leaks([key, SECRET], seen) == [], where


async def test_a_server_that_challenges_with_bearer_gets_bearer_tokens(
    data_dir: Path, host_secret: HostSecret
) -> None:
    # The authorization server offers DPoP, the MCP server does not (it challenges Bearer): a
    # bound token would only be refused there.
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            machine_oauth_server(client_id="svc", secret=SECRET, dpop=True, resource_dpop=False) as server,
            owner_chat(data_dir, host_secret, SCOPE) as chat,
        ):
            added = await chat.command(ADD.format(url=server.url))
            assert added.startswith("Added bot: connected"), added
            assert "returned:\na machine" in await chat.command("bot__whoami")
            assert server.tokens and server.bound == {} and server.token_proofs.passed == 0
