"""Enterprise-managed authorization (SEP-990) through the real chat: the owner's ID token at
their identity provider, asked in secret, becomes an ID-JAG and an access token with no login;
the ID token and the client secret show nowhere (replies, files, DEBUG logs) and go only where
they belong; an IdP's refusal is told in fixed words.

Against ``servers.enterprise_oauth``: an IdP, an authorization server and an MCP server on
loopback, each keeping every token request it received.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from playa.mcp_remote import HostSecret
from servers.enterprise_oauth import (
    CLIENT_ID,
    IDP_CLIENT_ID,
    INSTRUCTION,
    EnterpriseServer,
    enterprise_oauth_server,
)
from support.chat import ScriptedUI
from support.host import ModelSource
from support.leaks import leaks
from support.oauth import every_file
from support.providers import serve_provider, text, tool_call
from support.remote import OwnerChat, owner_chat

pytestmark = [pytest.mark.anyio]

TEST_TIMEOUT = 90.0
SCOPE = "console:enterprise"
SECRET = "cs-" + "Hk4Wq9Zr2Tn7Lm3Vb8Xc5Pd1"


@asynccontextmanager
async def enterprise_chat(
    data_dir: Path, host_secret: HostSecret, model: ModelSource | None = None, *, refuse: bool = False
) -> AsyncIterator[tuple[EnterpriseServer, OwnerChat]]:
    """The enterprise servers on loopback (the IdP refusing if ``refuse``), and the owner's chat."""
    async with (
        enterprise_oauth_server(secret=SECRET, refuse=refuse) as server,
        owner_chat(data_dir, host_secret, SCOPE, model) as chat,
    ):
        yield server, chat


async def add_corp(chat: OwnerChat, server: EnterpriseServer, ui: ScriptedUI | None = None) -> str:
    """The owner adds the server as ``corp`` with the enterprise grant, giving the ID token when
    asked (on ``ui`` if given); the reply."""
    return await chat.command(
        f"/mcp_add corp {server.url} --client-id {CLIENT_ID} --client-secret {SECRET} "
        f"--grant enterprise --idp {server.idp} --idp-client-id {IDP_CLIENT_ID} --id-token",
        ui or ScriptedUI(answers=[server.id_token]),
    )


async def test_the_owners_id_token_asked_in_secret_gets_the_client_its_tokens_and_shows_nowhere(
    data_dir: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(TEST_TIMEOUT):
        async with enterprise_chat(data_dir, host_secret) as (server, chat):
            ui = ScriptedUI(answers=[server.id_token])
            added = await add_corp(chat, server, ui)
            assert added.startswith("Added corp: connected"), added
            ((question, secret),) = ui.asked
            assert secret and "ID token" in question
            called = await chat.command("corp__whoami")
            assert "returned:\nan enterprise user" in called, called
            # The ID token went to the IdP alone; the secret and the ID-JAG to the authorization server.
            assert len(server.idp_requests) == 1 and server.id_token in server.idp_requests[0]
            assert server.jags and server.jags[0] in server.as_requests[0]
            assert not any(server.id_token in r for r in server.as_requests)
            assert not any(SECRET in r or "Basic" in r for r in server.idp_requests)
            auth = await chat.command("/mcp_auth corp", ScriptedUI())
            assert "needs no login" in auth, auth
            channels = {
                **every_file(data_dir),
                **{f"reply {i}": text for i, text in enumerate([added, called, auth, *ui.sent])},
                "log": caplog.text,
            }
            assert any(where.endswith("servers.json") for where in channels)
            for where, seen in channels.items():
                assert leaks([server.id_token, SECRET, *server.jags], seen) == [], where


async def test_the_model_gets_the_servers_answer_and_nothing_of_the_grant(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            serve_provider() as provider,
            enterprise_chat(data_dir, host_secret, provider.model("openai-chat")) as (server, chat),
        ):
            added = await add_corp(chat, server)
            assert added.startswith("Added corp: connected"), added
            provider.script(tool_call("corp__whoami", {}), text("You are an enterprise user."))
            await chat.say("Who am I there?")
            assert b"an enterprise user" in provider.requests[1].raw
            grant = [server.id_token, SECRET, *server.jags, *server.tokens]
            for request in provider.requests:
                assert leaks(grant, request.raw.decode()) == []


async def test_an_expired_access_token_is_replaced_by_a_new_exchange_without_the_owner(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with enterprise_chat(data_dir, host_secret) as (server, chat):
            added = await add_corp(chat, server)
            assert added.startswith("Added corp: connected"), added
            server.drop_tokens()
            # The call that meets the refusal may fail; the next gets a new token by itself.
            replies = [await chat.command("corp__whoami") for _ in range(2)]
            assert "returned:\nan enterprise user" in replies[-1], replies
            assert len(server.idp_requests) == 2 and len(server.as_requests) == 2


async def test_an_idps_refusal_is_told_in_fixed_words_never_its_own(
    data_dir: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(TEST_TIMEOUT):
        async with enterprise_chat(data_dir, host_secret, refuse=True) as (server, chat):
            added = await add_corp(chat, server)
            listed = await chat.command("/mcp_list")
            shown = added + listed
            assert "the identity provider refused the ID token (invalid_grant)" in shown, shown
            assert "new credentials with /mcp_add corp" in shown, shown
            for seen in (shown, caplog.text):
                assert INSTRUCTION not in seen and "SYSTEM" not in seen
                assert leaks([server.id_token, SECRET], seen) == []
            assert server.as_requests == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("--grant enterprise --idp https://idp.example --id-token", "--grant enterprise takes --client-id"),
        ("--client-id c --client-secret abcdefghijkl --grant enterprise --id-token", "--idp <issuer-url>"),
        ("--idp https://idp.example", "go with --grant enterprise"),
        ("--client-id c --grant enterprise --idp ftp://idp.example --id-token", "--idp takes the identity"),
        (
            "--client-id c --client-secret abcdefghijkl --grant enterprise --idp https://i.example --id-token not-a-jwt",
            "not a JWT",
        ),
    ],
)
async def test_enterprise_options_that_cannot_work_are_refused_with_what_to_fix(
    data_dir: Path, host_secret: HostSecret, options: str, message: str
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with owner_chat(data_dir, host_secret, SCOPE) as chat:
            reply = await chat.command(f"/mcp_add corp http://127.0.0.1:9/mcp {options}", ScriptedUI())
            assert message in reply, reply
            assert "not-a-jwt" not in reply
            assert "corp" not in await chat.command("/mcp_list")
