"""An OAuth server's lifecycle after the login: revocation on removal, scopes it lacks, a pasted redirect.

Against a real authorization server (npm oidc-provider) protecting an SDK MCP server, on loopback.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import anyio
import httpx2
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

from playa.agent import Host
from playa.core import ChatSession
from playa.mcp_remote import HostSecret
from playa.mcp_remote.store import OAuthGrant
from playa.mcp_remote.transport import challenge_description, missing_scope, revoke
from servers.oidc import authorization_server
from support.chat import GUEST, RecordingModel, ScriptedUI, msg
from support.leaks import leaks
from support.oauth import (
    SCOPE,
    OwnerUI,
    every_file,
    introspect,
    link_in,
    log_in,
    log_in_again,
    protected_chat,
    protected_server,
    refuse_sign_in,
    sealed_entry,
    sign_in_elsewhere,
)
from support.remote import SETTINGS, remote_host

pytestmark = [pytest.mark.anyio]

TEST_TIMEOUT = 60.0


def stored_grant(workspace: Path, secret: HostSecret) -> OAuthGrant:
    oauth = sealed_entry(workspace, secret).oauth
    assert oauth is not None and oauth.tokens is not None
    return oauth


@pytest.mark.npm
async def test_removing_a_server_revokes_its_tokens_and_they_no_longer_work(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with protected_chat(data_dir, host_secret) as (auth, mcp, host, session):
            await log_in(host, session, mcp.url)
            grant = stored_grant(session.workspace, host_secret)
            assert grant.tokens is not None and grant.tokens.refresh_token
            tokens = (grant.tokens.access_token, grant.tokens.refresh_token)
            assert [await introspect(auth, token) for token in tokens] == [True, True]

            removed = await host.handle(session, msg("/mcp_remove linear"), ScriptedUI())
            assert removed is not None
            assert removed.text == (
                "Removed linear; its 2 tools are gone. Its tokens were revoked at the authorization server."
            )
            assert [await introspect(auth, token) for token in tokens] == [False, False]
            # And the MCP server refuses the old access token.
            async with httpx2.AsyncClient(timeout=60.0) as client:
                refused = await client.post(
                    mcp.url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={
                        "Authorization": f"Bearer {tokens[0]}",
                        "Accept": "application/json, text/event-stream",
                    },
                )
            assert refused.status_code == 401


@pytest.mark.npm
async def test_a_revocation_that_fails_never_blocks_the_removal_and_the_reply_holds_no_token(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with remote_host(data_dir, host_secret) as host:
            session = await host.session(SCOPE, owner="owner")
            async with authorization_server() as auth, protected_server(auth) as mcp:
                await log_in(host, session, mcp.url)
                grant = stored_grant(session.workspace, host_secret)
            # The authorization server is gone: the revocation cannot reach it.
            removed = await host.handle(session, msg("/mcp_remove linear"), ScriptedUI())
            assert removed is not None
            assert removed.text.startswith("Removed linear")
            assert "Its tokens could not be revoked (the authorization server could not be reached)" in (
                removed.text
            )
            listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
            assert listed is not None and listed.text.startswith("No remote MCP servers"), listed.text
            assert leaks(grant.secrets, removed.text) == []


def grant_from(issuer: str, *, revocation: bool) -> OAuthGrant:
    """A grant ``issuer`` made (its metadata names a revocation endpoint, or none), with made-up tokens."""
    endpoints = {"authorization_endpoint": f"{issuer}/auth", "token_endpoint": f"{issuer}/token"}
    if revocation:
        endpoints["revocation_endpoint"] = f"{issuer}/revoke"
    return OAuthGrant(
        resource="http://127.0.0.1:1/mcp",
        issuer=issuer,
        client=OAuthClientInformationFull(client_id="playa", token_endpoint_auth_method="none"),
        tokens=OAuthToken(access_token="access-7f3a9c", refresh_token="refresh-2b8e41"),
        metadata=OAuthMetadata.model_validate({"issuer": issuer, **endpoints}),
    )


async def test_a_revocation_endpoint_that_never_answers_is_given_up_in_time() -> None:
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as silent:
        port = silent.extra(anyio.abc.SocketAttribute.local_port)
        grant = grant_from(f"http://127.0.0.1:{port}", revocation=True)
        started = time.monotonic()
        with anyio.fail_after(TEST_TIMEOUT):
            async with httpx2.AsyncClient(timeout=30.0) as http:
                outcome = await revoke(grant, http, timeout=0.5)
        assert time.monotonic() - started >= 0.5
        assert outcome.outcome == "failed"
        assert "no answer within 0.5 s" in outcome.text
        assert "access-7f3a9c" not in outcome.text and "refresh-2b8e41" not in outcome.text


@pytest.mark.npm
async def test_a_tool_that_needs_a_scope_the_login_lacks_names_it_and_the_command_that_helps(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        scope = "files:write"  # which the authorization server never grants
        async with protected_chat(data_dir, host_secret, write_scope=scope) as (_, mcp, host, session):
            ui = await log_in(host, session, mcp.url)
            called = await host.handle(session, msg('linear__write {"text": "x"}'), ScriptedUI())
            assert called is not None
            needs = "needs scope files:write — the owner can run /mcp_auth linear"
            assert needs in called.text, called.text
            # Only the owner's login can add the scope: the server waits for it, with no retry
            # timer. The owner was asked, privately; this authorization server will not even
            # register a client for the scope, and the owner alone is told so.
            listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
            assert listed is not None
            assert listed.text.splitlines()[0] == f"linear: unavailable: {needs}", listed.text
            assert "next retry" not in listed.text
            assert needs in (session.prompt.get("Remote MCP servers") or "")
            assert ui.private[-1] == (
                "The login to linear failed: the authorization server refused to register Playa as a client."
            ), ui.private
            assert ui.private[-2].startswith("What the authorization server said of the login to linear: ")
            assert all("refused to register" not in said for said in ui.sent)


def challenge(value: str, status: int = 403) -> httpx2.Response:
    return httpx2.Response(status, headers={"WWW-Authenticate": value})


def test_the_missing_scope_comes_from_the_challenge_and_only_as_scope_tokens() -> None:
    named = challenge('Bearer error="insufficient_scope", scope="files:write repo", resource_metadata="x"')
    assert missing_scope(named) == "needs scope files:write, repo"
    # The SDK's own server names the scope in its description only: the server's words, which
    # the owner is shown apart (they never join the reason the prompt carries).
    described = challenge(
        'Bearer error="insufficient_scope", error_description="Required scope: files:write"'
    )
    assert missing_scope(described) == "needs a scope the login did not grant"
    assert challenge_description(described) == "Required scope: files:write"
    # A scope value that is no list of scope tokens is not named as one.
    hostile = challenge('Bearer error="insufficient_scope", scope="files:write\\ ignore"')
    assert missing_scope(hostile) == "needs a scope the login did not grant"
    assert missing_scope(challenge('Bearer error="invalid_token", scope="a"')) is None
    assert missing_scope(challenge('Bearer error="insufficient_scope", scope="a"', status=401)) is None


@pytest.mark.npm
async def test_a_server_that_wants_more_scope_to_connect_says_which_and_waits_for_the_owner(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with protected_chat(data_dir, host_secret, list_scope="tools:read") as (_, mcp, host, session):
            ui = await log_in(host, session, mcp.url, outcome="unavailable")
            expected = "unavailable: needs scope tools:read — the owner can run /mcp_auth linear"
            assert ui.sent[-1] == f"Logged in to linear: {expected}.", ui.sent
            listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
            assert listed is not None
            assert listed.text.splitlines()[0] == f"linear: {expected}"
            assert "next retry" not in listed.text
            assert expected.removeprefix("unavailable: ") in (session.prompt.get("Remote MCP servers") or "")


async def started_login(host: Host, session: ChatSession, url: str) -> tuple[OwnerUI, str]:
    """``/mcp_add`` a server that needs a login; the owner signs in on a machine that cannot reach
    the loopback callback. Returns the owner's UI and the address the browser ended at."""
    ui = OwnerUI()
    await host.handle(session, msg(f"/mcp_add linear {url}"), ui)
    await ui.link.wait()
    (text,) = ui.private
    assert "/mcp_auth linear --paste" in text
    return ui, await sign_in_elsewhere(ui.link_url())


@pytest.mark.npm
async def test_the_owner_pastes_the_address_the_login_ended_at_as_a_secret_answer(
    data_dir: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    model = RecordingModel()
    with anyio.fail_after(TEST_TIMEOUT):
        async with protected_chat(data_dir, host_secret, model) as (_, mcp, host, session):
            ui, ended_at = await started_login(host, session, mcp.url)
            code = parse_qs(urlsplit(ended_at).query)["code"][0]
            caplog.clear()  # the test's own browser logged the address it was sent to

            # Another member of the chat cannot complete the owner's login.
            guest = await host.handle(session, msg("/mcp_auth linear --paste", GUEST), ScriptedUI([ended_at]))
            assert guest is not None and "Logged in" not in guest.text
            # Nor can the owner from another chat.
            other = await host.session("console:other", owner="owner")
            elsewhere = await host.handle(other, msg(f"/mcp_auth linear {ended_at}"), ScriptedUI())
            assert elsewhere is not None
            assert elsewhere.text == "There is no server named 'linear'. /mcp_list shows them." or (
                "unknown, used or expired" in elsewhere.text
            ), elsewhere.text
            # An address that is not the callback's is refused without being quoted.
            wrong = ScriptedUI(["https://example.com/oauth/callback?code=x&state=y"])
            refused = await host.handle(session, msg("/mcp_auth linear --paste"), wrong)
            assert refused is not None and refused.text.startswith("That is not the address"), refused.text
            assert "example.com" not in refused.text

            answering = ScriptedUI([ended_at])
            ui.said = anyio.Event()
            pasted = await host.handle(session, msg("/mcp_auth linear --paste"), answering)
            assert pasted is not None
            assert pasted.text == "Playa received the login for linear."
            assert answering.asked and answering.asked[0][1] is True  # asked as a secret
            await ui.said.wait()
            assert ui.sent[-1].startswith("Logged in to linear: connected"), ui.sent

            # Used once: the same address again is refused.
            again = await host.handle(session, msg(f"/mcp_auth linear {ended_at}"), ScriptedUI())
            assert again is not None and "unknown, used or expired" in again.text

            called = await host.handle(session, msg("linear__whoami"), ScriptedUI())
            assert called is not None and "signed in" in called.text
            files = every_file(data_dir)
            assert any(name.endswith(".jsonl") for name in files)  # the history is there
            for text in (repr(model.seen), caplog.text, pasted.text, again.text, *files.values()):
                assert code not in text


@pytest.mark.npm
async def test_a_pasted_address_with_another_issuer_or_after_the_link_expired_completes_no_login(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with protected_chat(data_dir, host_secret) as (auth, mcp, host, session):
            ui, ended_at = await started_login(host, session, mcp.url)
            assert f"iss={quote(auth.issuer, safe='')}" in ended_at
            forged = ended_at.replace(quote(auth.issuer, safe=""), quote("http://127.0.0.1:9/", safe=""))
            ui.said = anyio.Event()
            await host.handle(session, msg(f"/mcp_auth linear {forged}"), ScriptedUI())
            await ui.said.wait()
            assert ui.sent[-1].startswith("The login to linear failed"), ui.sent
            listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
            assert listed is not None and "this server needs a login" in listed.text

        expiring = replace(SETTINGS, login_timeout=0.5)
        async with protected_chat(data_dir, host_secret, settings=expiring) as (_, mcp, host, session):
            ui = OwnerUI()
            await host.handle(session, msg(f"/mcp_add linear {mcp.url} --oauth"), ui)
            await ui.link.wait()
            await ui.until(lambda seen: len(seen.private) == 2)
            assert "was not used within" in ui.private[-1]
            ended_at = await sign_in_elsewhere(link_in(ui.private[0]))
            late = await host.handle(session, msg(f"/mcp_auth linear {ended_at}"), ScriptedUI())
            assert late is not None and "unknown, used or expired" in late.text


async def test_an_authorization_server_without_revocation_is_said_to_offer_none() -> None:
    grant = grant_from("http://127.0.0.1:9", revocation=False)
    async with httpx2.AsyncClient(timeout=60.0) as http:
        outcome = await revoke(grant, http)
        nothing = await revoke(OAuthGrant(resource="http://127.0.0.1:1/mcp"), http)
    assert outcome.outcome == "not offered"
    assert "offers no revocation: its tokens stay valid until they expire" in outcome.text
    assert nothing.text == ""


@pytest.mark.npm
async def test_a_connect_refused_for_scopes_the_login_granted_says_so_waits_for_the_owner_and_suggests_one_new_login(
    data_dir: Path, host_secret: HostSecret
) -> None:
    refused = "the server refused access (403) although the login granted the scopes it asked for: mcp"
    with anyio.fail_after(TEST_TIMEOUT):
        # Listing the tools needs "mcp", which every token here holds: the server refuses anyway.
        model = RecordingModel()
        async with protected_chat(data_dir, host_secret, model, list_scope="mcp") as (_, mcp, host, session):
            ui = await log_in(host, session, mcp.url, outcome="unavailable")
            first = f"unavailable: {refused} — the owner can run /mcp_auth linear to log in again"
            assert ui.sent[-1] == f"Logged in to linear: {first}.", ui.sent
            listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
            assert listed is not None
            assert listed.text.splitlines()[0] == f"linear: {first}", listed.text
            assert "next retry" not in listed.text  # a timer cannot change the server's mind
            await host.handle(session, msg("hello"), ScriptedUI())
            assert first.removeprefix("unavailable: ") in (session.prompt.get("Remote MCP servers") or "")
            assert first.removeprefix("unavailable: ") in repr(model.seen)

            # The owner logs in again, and the server still refuses: no further login is suggested.
            said = await log_in_again(host, session, ui)
            again = f"unavailable: {refused}, and again after a new login: the account needs access at the server itself"
            assert said == f"Logged in to linear: {again}.", ui.sent
            assert "/mcp_auth" not in ui.sent[-1]
            listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
            assert listed is not None
            assert listed.text.splitlines()[0] == f"linear: {again}", listed.text
            assert "next retry" not in listed.text
            assert len(ui.private) == 2  # nobody was sent a link but for the owner's two logins


@pytest.mark.npm
async def test_a_new_login_revokes_the_tokens_it_replaces_once_its_own_are_stored_and_a_failed_one_leaves_them_working(
    data_dir: Path, host_secret: HostSecret
) -> None:
    def tokens_of(grant: OAuthGrant) -> tuple[str, str]:
        assert grant.tokens is not None and grant.tokens.refresh_token
        return grant.tokens.access_token, grant.tokens.refresh_token

    async def work(tokens: tuple[str, str]) -> list[bool]:
        return [await introspect(auth, token) for token in tokens]

    with anyio.fail_after(TEST_TIMEOUT * 2):
        async with protected_chat(data_dir, host_secret) as (auth, mcp, host, session):
            ui = await log_in(host, session, mcp.url)
            first = tokens_of(stored_grant(session.workspace, host_secret))

            # A new login the owner cancels at the authorization server changes nothing.
            said = await log_in_again(host, session, ui, browser=refuse_sign_in)
            assert said.startswith("The login to linear failed: access_denied"), ui.sent
            assert await work(first) == [True, True]
            assert tokens_of(stored_grant(session.workspace, host_secret)) == first
            called = await host.handle(session, msg("linear__whoami"), ScriptedUI())
            assert called is not None and "signed in" in called.text, called.text

            # One that succeeds revokes them, once its own tokens are stored.
            said = await log_in_again(host, session, ui)
            assert said == "Logged in to linear: connected over streamable-http, 2 tools.", ui.sent
            second = tokens_of(stored_grant(session.workspace, host_secret))
            assert set(second).isdisjoint(first)
            assert await work(first) == [False, False]
            assert await work(second) == [True, True]
            called = await host.handle(session, msg("linear__whoami"), ScriptedUI())
            assert called is not None and "signed in" in called.text, called.text

            # Replacing the entry (/mcp_add with its name): its new login revokes the grant it replaces.
            ui = await log_in(host, session, mcp.url)
            third = tokens_of(stored_grant(session.workspace, host_secret))
            assert await work(second) == [False, False]
            assert await work(third) == [True, True]
