"""OAuth end to end: a real authorization server (npm oidc-provider) protecting an SDK MCP server.

The test plays the owner's browser with httpx2: it opens the link Playa sent privately, signs in
and consents on the authorization server's own pages, and its last redirect reaches Playa's
loopback callback listener.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp.server.mcpserver import MCPServer

from playa._asgi import bind
from playa.mcp_remote import HostSecret
from playa.mcp_remote.store import Sealer, ServerStore
from servers.oidc import authorization_server
from servers.python_servers import LOOPBACK, serve_mcp
from support.chat import RecordingModel, ScriptedUI, msg
from support.leaks import leaks
from support.oauth import (
    SCOPE,
    OwnerUI,
    every_file,
    link_in,
    log_in,
    protected_chat,
    protected_server,
    sealed_entry,
    sign_in,
)
from support.providers import serve_provider, text, tool_call
from support.remote import SETTINGS, owner_chat, remote_host

pytestmark = [pytest.mark.anyio, pytest.mark.npm]

TEST_TIMEOUT = 60.0


async def test_a_server_that_needs_a_login_is_logged_in_by_the_owner_and_its_tokens_never_show(
    data_dir: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    model = RecordingModel()
    with anyio.fail_after(TEST_TIMEOUT):
        async with authorization_server() as auth, protected_server(auth) as mcp:
            async with remote_host(data_dir, host_secret, model) as host:
                session = await host.session(SCOPE, owner="owner")
                ui = OwnerUI()
                added = await host.handle(session, msg(f"/mcp_add linear {mcp.url}"), ui)
                assert added is not None
                # The reply says what happened: the link was sent already, above (the console's
                # private channel), on a line of its own.
                assert added.text == (
                    "Added linear: this server needs a login. I sent you the link to log in to linear "
                    "above: it works for 10 minutes. I say here when the login is done; the chat goes on meanwhile."
                ), added.text
                assert ui.link.is_set() and len(ui.private) == 1
                link = ui.link_url()
                assert link.startswith(f"{auth.issuer}/auth?")
                assert "code_challenge_method=S256" in link
                # The link went to the owner alone, never to the chat.
                assert all(link not in text for text in ui.sent)

                # Meanwhile the chat goes on, and the prompt says why the server is unavailable.
                meanwhile = await host.handle(session, msg("hello"), ScriptedUI())
                assert meanwhile is not None
                assert "linear: unavailable: this server needs a login" in (
                    session.prompt.get("Remote MCP servers") or ""
                )

                callback = await sign_in(link)
                assert callback.status_code == 200
                assert "received the login for linear" in callback.text
                await ui.said.wait()
                assert ui.sent[-1] == "Logged in to linear: connected over streamable-http, 2 tools."

                called = await host.handle(session, msg("linear__whoami"), ScriptedUI())
                assert called is not None
                assert "signed in" in called.text

                # A replayed callback is refused.
                async with httpx2.AsyncClient(timeout=60.0) as browser:
                    replay = await browser.get(str(callback.url))
                assert "unknown, used or expired" in replay.text

                secrets = sealed_entry(session.workspace, host_secret).secrets
                assert len(secrets) >= 2  # the access and refresh tokens at least
                listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
                assert listed is not None
                seen = [
                    repr(model.seen),
                    *ui.sent,
                    *ui.private,
                    added.text,
                    called.text,
                    listed.text,
                    caplog.text,
                    (session.workspace / ".volcanic/mcp/servers.json").read_text(),
                ]
                files = every_file(data_dir)
                assert any(".volcanic/mcp/servers.json" in name for name in files)
                for text in seen:
                    assert leaks(secrets, text) == []
                for name, text in files.items():
                    assert leaks(secrets, text) == [], name

            # After a restart the stored tokens connect at once: no login.
            async with owner_chat(data_dir, host_secret, SCOPE) as chat:
                await chat.say("hello")
                listed = await chat.command("/mcp_list")
                assert listed.startswith("linear: connected over streamable-http, 2 tools"), listed
                assert "signed in" in await chat.command("linear__whoami")


async def test_a_link_not_used_in_time_expires_with_a_clear_message(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    started = time.monotonic()
    with anyio.fail_after(TEST_TIMEOUT):
        expiring = replace(SETTINGS, login_timeout=0.5)
        async with protected_chat(data_dir, host_secret, model, expiring) as (_, mcp, host, session):
            ui = OwnerUI()
            await host.handle(session, msg(f"/mcp_add linear {mcp.url} --oauth"), ui)
            await ui.link.wait()
            # Told where the link went: the owner's private channel.
            await ui.until(lambda seen: len(seen.private) == 2)
            assert time.monotonic() - started >= 0.5
            assert ui.private[-1] == (
                "The login link for linear was not used within 1 second. Run /mcp_auth linear for a new link."
            )
            assert not any("was not used within" in said for said in ui.sent)
            callback = await sign_in(link_in(ui.private[0]))
            assert "unknown, used or expired" in callback.text


async def test_tokens_are_refreshed_before_expiry_and_a_refused_refresh_waits_for_the_owner(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        # Tokens that live 30 s are within the 60 s refresh margin from the start: every connect
        # refreshes first, and the refreshed token outlives the connect.
        async with authorization_server(access_ttl=30) as auth, protected_server(auth) as mcp:
            async with remote_host(data_dir, host_secret) as host:
                session = await host.session(SCOPE, owner="owner")
                ui = await log_in(host, session, mcp.url)
                assert ui.sent[-1] == "Logged in to linear: connected over streamable-http, 2 tools."
                workspace = session.workspace
            store = ServerStore(workspace, SCOPE, Sealer(host_secret.value))
            (first,) = store.load().entries
            assert first.oauth is not None and first.oauth.tokens is not None

            # A restart connects with a refreshed token: the sealed one changes.
            async with owner_chat(data_dir, host_secret, SCOPE) as chat:
                await chat.say("hello")
                listed = await chat.command("/mcp_list")
                assert listed.startswith("linear: connected"), listed
            (second,) = store.load().entries
            assert second.oauth is not None and second.oauth.tokens is not None
            assert second.oauth.tokens.access_token != first.oauth.tokens.access_token

            # The owner revokes the grant at the authorization server: the refresh is refused.
            assert second.oauth.client is not None and second.oauth.tokens.refresh_token
            async with httpx2.AsyncClient(timeout=60.0) as client:
                revoked = await client.post(
                    f"{auth.issuer}/token/revocation",
                    data={
                        "token": second.oauth.tokens.refresh_token,
                        "client_id": second.oauth.client.client_id,
                    },
                )
            assert revoked.status_code == 200
            async with owner_chat(data_dir, host_secret, SCOPE) as chat:
                await chat.say("hello")
                listed = await chat.command("/mcp_list")
                first_line = listed.splitlines()[0]
                assert first_line == (
                    "linear: unavailable: authorization expired — the owner can run /mcp_auth linear"
                ), first_line
                assert "next retry" not in listed
                prompt = (await chat.session()).prompt.get("Remote MCP servers") or ""
                assert "authorization expired — the owner can run /mcp_auth linear" in prompt


async def test_a_call_refused_for_a_scope_sends_the_owner_a_link_for_the_wider_scope_once_without_an_error_log(
    data_dir: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(TEST_TIMEOUT):
        model = RecordingModel()
        async with protected_chat(data_dir, host_secret, model, step_up=True) as (_, mcp, host, session):
            ui = await log_in(host, session, mcp.url, "notes")
            (first_scope,) = parse_qs(urlsplit(ui.link_url()).query)["scope"]
            assert "mcp:write" not in first_scope.split()
            assert ui.sent[-1] == "Logged in to notes: connected over streamable-http, 4 tools."
            first_grant = sealed_entry(session.workspace, host_secret).secrets

            # The token lacks mcp:write: the call fails, and the owner is sent a link at once,
            # privately, as the first login's was; the model is told so.
            ui.link, ui.said = anyio.Event(), anyio.Event()
            refused = await host.handle(session, msg("notes__publish"), ScriptedUI())
            assert refused is not None
            assert (
                "notes__publish failed: needs scope mcp:write. The owner was sent a link to log in with it"
            ) in refused.text, refused.text
            assert len(ui.private) == 2 and ui.link.is_set()
            needs = "needs scope mcp:write — the owner can run /mcp_auth notes"
            assert f"notes: unavailable: {needs}" in (session.prompt.get("Remote MCP servers") or "")

            # The link asks for what was granted and what the call needed (SEP-2350).
            (scope,) = parse_qs(urlsplit(link_in(ui.private[-1])).query)["scope"]
            assert set(scope.split()) == {*first_scope.split(), "mcp:write"}
            await sign_in(link_in(ui.private[-1]))
            await ui.said.wait()
            assert ui.sent[-1] == "Logged in to notes: connected over streamable-http, 4 tools."
            published = await host.handle(session, msg("notes__publish"), ScriptedUI())
            assert published is not None and "published" in published.text

            # A refusal for scopes the token holds already: no login can help, and none is asked for.
            private = len(ui.private)
            denied = await host.handle(session, msg("notes__delete"), ScriptedUI())
            assert denied is not None
            assert "HTTP 403" in denied.text and "/mcp_auth" not in denied.text
            assert len(ui.private) == private

            # An expected end is no error: the SDK's "OAuth flow error" traceback is not logged.
            assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []

            # Neither login's tokens nor either registration's secret shows anywhere: not to
            # the model, in a reply, a log line, or a file outside the seal.
            second_grant = sealed_entry(session.workspace, host_secret).secrets
            assert first_grant and second_grant and not first_grant & second_grant
            seen = [
                repr(model.seen),
                *ui.sent,
                *ui.private,
                refused.text,
                published.text,
                denied.text,
                caplog.text,
            ]
            files = every_file(data_dir)
            for text in seen:
                assert leaks(first_grant | second_grant, text) == []
            for name, text in files.items():
                assert leaks(first_grant | second_grant, text) == [], name


async def test_calls_refused_at_once_for_one_scope_send_the_owner_one_link(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            serve_provider() as provider,
            protected_chat(data_dir, host_secret, provider.model("openai-chat"), step_up=True) as (
                _,
                mcp,
                host,
                session,
            ),
        ):
            ui = await log_in(host, session, mcp.url, "notes")
            # The model calls the tool twice in one step: both calls are refused for mcp:write.
            provider.script(tool_call("notes__publish", {}, ("notes__publish", {})), text("done"))
            reply = await host.handle(session, msg("publish twice"), ScriptedUI())
            assert reply is not None and "done" in reply.text
            assert len(ui.private) == 2  # the first login's link, and one for the added scope
            results = provider.requests[-1].raw.decode()
            assert results.count("The owner was sent a link to log in with it") == 2, results


async def test_a_server_that_wants_a_fixed_bearer_token_is_tried_as_oauth_and_the_owner_is_told_how_to_add_the_token(
    data_dir: Path, host_secret: HostSecret
) -> None:
    # Its 401 says only "Bearer", as a 2025-03-26 OAuth server's does; no metadata anywhere.
    server = MCPServer("fixed")

    @server.tool()
    def ping() -> str:
        """Answers pong."""
        return "pong"

    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            serve_mcp(server, bearer="a-fixed-token-" + "x" * 20) as fixed,
            remote_host(data_dir, host_secret) as host,
        ):
            session = await host.session(SCOPE, owner="owner")
            ui = OwnerUI()
            added = await host.handle(session, msg(f"/mcp_add fixed {fixed.url}"), ui)
            assert added is not None
            # The login failed before any link could be sent: the reply says so, and why.
            assert added.text.startswith(
                "Added fixed: this server needs a login. The login to fixed failed: "
            )
            assert added.text.endswith(
                "It publishes no OAuth metadata: if it takes a fixed token, add it again with "
                "/mcp_add fixed <url> --bearer"
            )
            assert "sent you the link" not in added.text
            assert ui.private == []  # no link: there was nothing to log in to
            assert ui.sent == []  # and nothing more is said later: the reply said it all
            again = await host.handle(session, msg("/mcp_auth fixed"), ui)
            assert again is not None and again.text.startswith("The login to fixed failed: "), again.text


async def test_a_fixed_callback_port_is_the_redirect_uri_the_login_registers_and_listens_on(
    data_dir: Path, host_secret: HostSecret
) -> None:
    sock = bind(LOOPBACK, 0)
    port = sock.getsockname()[1]
    sock.close()  # a free port, for the listener to take
    settings = replace(SETTINGS, oauth_callback_port=port)
    with anyio.fail_after(TEST_TIMEOUT):
        async with protected_chat(data_dir, host_secret, settings=settings) as (_, mcp, host, session):
            ui = OwnerUI()
            await host.handle(session, msg(f"/mcp_add linear {mcp.url}"), ui)
            await ui.link.wait()
            (redirect,) = parse_qs(urlsplit(ui.link_url()).query)["redirect_uri"]
            assert redirect == f"http://127.0.0.1:{port}/oauth/callback"
            callback = await sign_in(ui.link_url())
            assert callback.url.port == port and "received the login for linear" in callback.text
            await ui.said.wait()
            assert ui.sent[-1] == "Logged in to linear: connected over streamable-http, 2 tools."


class NoPrivateChat(OwnerUI):
    """A group's owner who never opened a private chat with the bot: nothing private reaches them."""

    async def send_private(self, text: str) -> object:
        return None


async def test_the_reply_says_when_the_link_could_not_be_sent_privately_and_a_new_login_sends_it(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with protected_chat(data_dir, host_secret) as (_, mcp, host, session):
            ui = NoPrivateChat(private_place="in our private chat")
            added = await host.handle(session, msg(f"/mcp_add linear {mcp.url}"), ui)
            assert added is not None
            assert added.text == (
                "Added linear: this server needs a login. I could not send you the login link for linear "
                "privately. Start a private chat with me first, then run /mcp_auth linear again."
            ), added.text
            assert ui.sent == [] and ui.private == []

            ui = OwnerUI(private_place="in our private chat")
            again = await host.handle(session, msg("/mcp_auth linear"), ui)
            assert again is not None
            assert again.text == (
                "Logging in to linear. I sent you the link to log in to linear in our private chat: it "
                "works for 10 minutes. I say here when the login is done; the chat goes on meanwhile."
            ), again.text
            assert len(ui.private) == 1
            await sign_in(ui.link_url())
            await ui.said.wait()
            assert ui.sent[-1] == "Logged in to linear: connected over streamable-http, 2 tools."
