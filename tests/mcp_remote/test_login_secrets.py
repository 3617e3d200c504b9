"""OAuth's own secrets are the chat's credentials: the authorization code, the PKCE verifier and
the state never reach the model, the history or a reply, whoever echoes them.

Against a server that is its own authorization server (``servers.echo_oauth``): its token
endpoint sees the code and the verifier, and its tool or its refusal quotes them back. The
model is pydantic-ai's real OpenAI client against a loopback provider, whose recorded request
bodies are the oracle for what the model received.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest

from playa.agent import Host
from playa.core import ChatSession, CommandRouter, classify
from playa.mcp_remote import HostSecret
from servers.echo_oauth import INSTRUCTION, EchoOAuthServer, echo_oauth_server
from support.chat import GUEST, RecordingModel, ScriptedUI, msg
from support.leaks import leaks
from support.oauth import OwnerUI, every_file
from support.providers import ProviderServer, serve_provider, text, tool_call
from support.remote import remote_host

pytestmark = [pytest.mark.anyio]

TEST_TIMEOUT = 60.0
SCOPE = "console:oauth"


@asynccontextmanager
async def provider_host(data_dir: Path, secret: HostSecret) -> AsyncIterator[tuple[ProviderServer, Host]]:
    """A host with the remote-MCP extension whose model is a real provider client on loopback."""
    async with (
        serve_provider() as provider,
        remote_host(data_dir, secret, provider.model("openai-chat")) as host,
    ):
        yield provider, host


async def start_login(host: Host, session: ChatSession, server: EchoOAuthServer) -> tuple[OwnerUI, str]:
    """``/mcp_add`` the server; returns the owner's UI and the address the sign-in ends at (not opened)."""
    ui = OwnerUI()
    added = await host.handle(session, msg(f"/mcp_add echo {server.url}"), ui)
    assert added is not None and "needs a login" in added.text, added
    await ui.link.wait()
    async with httpx2.AsyncClient() as browser:
        authorized = await browser.get(ui.link_url())
    assert authorized.is_redirect
    return ui, authorized.headers["location"]


def assert_nowhere(values: list[str], channels: dict[str, str]) -> None:
    assert values
    for where, seen in channels.items():
        assert leaks(values, seen) == [], where


async def test_a_server_that_echoes_the_code_and_the_verifier_shows_the_model_and_the_history_neither(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with echo_oauth_server() as server, provider_host(data_dir, host_secret) as (provider, host):
            session = await host.session(SCOPE, owner="owner")
            ui, ended_at = await start_login(host, session, server)
            state = parse_qs(urlsplit(ended_at).query)["state"][0]
            async with httpx2.AsyncClient() as browser:
                page = await browser.get(ended_at)
            assert "received the login for echo" in page.text
            await ui.said.wait()
            assert ui.sent[-1].startswith("Logged in to echo: connected"), ui.sent

            provider.script(tool_call("echo__login_secrets", {}), text("noted"))
            reply = await host.handle(session, msg("what did the server learn?"), ScriptedUI())
            assert reply is not None and "noted" in reply.text
            (result,) = [
                r
                for r in provider.requests
                if "login_secrets" in r.raw.decode() and "[redacted]" in r.raw.decode()
            ]
            assert "code=[redacted] verifier=[redacted]" in result.raw.decode()
            channels = {
                **{f"model request {i}": r.raw.decode("latin-1") for i, r in enumerate(provider.requests)},
                "reply": reply.text,
                **every_file(data_dir),
            }
            channels = {where: seen for where, seen in channels.items() if not where.endswith("servers.json")}
            assert any(where.endswith(".jsonl") for where in channels)  # the history is there
            assert_nowhere([*server.secrets, state], channels)


async def test_a_token_endpoint_that_refuses_with_the_code_in_its_text_is_reported_in_fixed_words(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with echo_oauth_server(refuse=True) as server, remote_host(data_dir, host_secret) as host:
            session = await host.session(SCOPE, owner="owner")
            ui, ended_at = await start_login(host, session, server)
            async with httpx2.AsyncClient() as browser:
                await browser.get(ended_at)
            await ui.said.wait()
            # The chat (a group, in Telegram) gets Playa's words and the RFC's error code only.
            assert ui.sent[-1] == (
                "The login to echo failed: the authorization server refused to issue tokens (invalid_grant)."
            ), ui.sent
            # The server's own words go to the owner alone, redacted.
            said = ui.private[-1]
            assert said.startswith("What the authorization server said of the login to echo: "), said
            assert "[redacted]" in said
            assert all(INSTRUCTION not in sent for sent in ui.sent)
            assert_nowhere(server.secrets, {"chat": "\n".join(ui.sent), "private": "\n".join(ui.private)})


async def test_the_owner_who_pastes_the_redirect_as_a_plain_message_completes_the_login_and_the_model_never_sees_it(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    with anyio.fail_after(TEST_TIMEOUT):
        async with echo_oauth_server() as server, remote_host(data_dir, host_secret, model) as host:
            session = await host.session(SCOPE, owner="owner")
            ui, ended_at = await start_login(host, session, server)
            code = parse_qs(urlsplit(ended_at).query)["code"][0]

            # A member who is not the owner cannot complete the owner's login; their message is
            # withheld and deleted all the same.
            member = ScriptedUI()
            guest = await host.handle(session, msg(ended_at, GUEST, ref="m1"), member)
            assert guest is not None
            assert "Only the chat's owner" in guest.text, guest.text
            assert member.deleted == ["m1"]

            ui.said = anyio.Event()
            pasted = await host.handle(session, msg(f"here it is: {ended_at}", ref="m2"), ui)
            assert pasted is not None
            assert pasted.text == "Playa received the login for echo.", pasted.text
            assert ui.deleted == ["m2"]
            await ui.said.wait()
            assert ui.sent[-1].startswith("Logged in to echo: connected"), ui.sent

            # Used once: the same address again completes nothing, and is withheld again.
            again = await host.handle(session, msg(ended_at), ScriptedUI())
            assert again is not None and "unknown, used or expired" in again.text

            assert model.seen == []  # no message went to the model
            await host.handle(session, msg("hello"), ScriptedUI())
            files = every_file(data_dir)
            history = [text for name, text in files.items() if name.endswith(".jsonl")]
            assert history and "hello" in "".join(history)
            for seen in (repr(model.seen), guest.text, pasted.text, again.text, *files.values()):
                assert code not in seen


async def test_a_redirect_address_with_no_login_waiting_for_it_is_withheld_all_the_same(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    with anyio.fail_after(TEST_TIMEOUT):
        async with remote_host(data_dir, host_secret, model) as host:
            session = await host.session(SCOPE, owner="owner")
            address = "https://app.example/oauth/callback?code=Zx81Tq0pLmN3vB7c&state=a8Fk2mQ"
            reply = await host.handle(session, msg(address), ScriptedUI())
            assert reply is not None
            assert reply.text == (
                "That is the address a login ended at: it holds a one-time code, so it was not sent to "
                "the agent. No login here waits for it."
            ), reply.text
            assert model.seen == []


def test_the_classifier_withholds_any_address_whose_query_has_a_code_and_a_state() -> None:
    commands = CommandRouter()
    address = "http://127.0.0.1:8765/oauth/callback?code=c0de-Xy&state=st4te&iss=http%3A%2F%2Fas"
    for message in (address, f"here: {address}.", f"({address})", "app.example/cb?state=s&code=c"):
        inbound = classify(message, commands)
        assert inbound.oauth_redirect is not None and inbound.carries_secret and not inbound.to_model
    assert classify(message, commands).oauth_redirect == "app.example/cb?state=s&code=c"
    for message in (
        "https://example.com/search?q=code+state",
        "https://example.com/?code=&state=s",  # no code in it
        "what is ?code=1 and state=2",
        "https://as.example/cb?error=access_denied&state=s",  # a refusal carries no code
    ):
        inbound = classify(message, commands)
        assert inbound.oauth_redirect is None and inbound.to_model, message
    # A command that carries one is deleted too.
    assert classify(f"/hello {address}", commands).carries_secret
