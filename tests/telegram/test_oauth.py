"""OAuth in Telegram, end to end: a real ``playa telegram`` process, the fake Bot API, a real
authorization server (npm oidc-provider) and the MCP server it protects, all on loopback.

The test plays the owner's browser. With ``PLAYA_PUBLIC_URL`` the redirect reaches the bot's
webhook listener; without one the owner pastes the address the browser ended at.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from anyio.abc import Process

from playa.mcp_remote import HostSecret, ServerStore, resolve_host_secret
from playa.mcp_remote.store import OAuthGrant, Sealer
from servers.echo_oauth import INSTRUCTION, echo_oauth_server
from servers.oidc import AuthorizationServer, authorization_server
from servers.python_servers import RunningServer, serve_asgi
from support.leaks import leaks
from support.oauth import introspect, link_in, protected_server, sign_in_elsewhere
from support.providers import DUMMY_KEY, serve_provider
from support.providers import text as answer_text

from .fake_bot_api import FakeBotApi, creator, group_chat, user
from .process import free_port, run_bot_process, stopped

pytestmark = [pytest.mark.anyio, pytest.mark.npm]

TOKEN = "123456789:AAHfakeTokenForTestsOnly0123456789abcd"
OWNER_ID, GROUP_ID = 7, -1007
OWNER, GROUP = user(OWNER_ID), group_chat(GROUP_ID)
TEST_TIMEOUT = 240.0
WAIT = 90.0
"""A healthy peer on a busy machine: a `playa telegram` process starting under load takes tens of seconds."""


def stored_grant(data_dir: Path) -> OAuthGrant:
    """The grant sealed in the group's servers.json, opened with the bot token's key."""
    (path,) = [p for p in data_dir.rglob("servers.json") if p.parent.parent.name == ".volcanic"]
    secret = resolve_host_secret({"TELEGRAM_BOT_TOKEN": TOKEN}, data_dir=data_dir, allow_generate=False)
    assert isinstance(secret, HostSecret)
    (entry,) = (
        ServerStore(path.parent.parent.parent, f"telegram:{GROUP_ID}", Sealer(secret.value)).load().entries
    )
    assert entry.oauth is not None and entry.oauth.tokens is not None
    return entry.oauth


def owned_group(tmp_path: Path) -> tuple[FakeBotApi, Path, Path]:
    """The fake Bot API, its group created by ``OWNER``; the bot's data dir, and the file its log goes to."""
    fake = FakeBotApi(TOKEN)
    fake.administrators[GROUP_ID] = [creator(OWNER)]
    return fake, tmp_path / "data", tmp_path / "stderr.log"


def public_url() -> tuple[int, str]:
    """A free loopback port, and the public URL the bot is told it is reached at through it."""
    port = free_port()
    return port, f"http://127.0.0.1:{port}/playa"


def public_bot(
    api_url: str, data_dir: Path, stderr: Path, port: int, public: str, **env: str
) -> Callable[[], AbstractAsyncContextManager[Process]]:
    """Starts the bot anew at each call: by webhook on ``port``, reached at ``public``, with ``env``."""
    return partial(
        run_bot_process,
        TOKEN,
        api_url,
        data_dir,
        stderr,
        webhook_port=port,
        extra_env={"PLAYA_PUBLIC_URL": public, **env},
    )


async def login_received(link: str, public: str) -> tuple[str, str]:
    """The owner signs in at ``link`` elsewhere, and their browser lands on the public callback,
    whose page says the login was received and is never cached: where it landed, and the code."""
    ended_at = await sign_in_elsewhere(link)
    assert ended_at.startswith(f"{public}/oauth/callback?")
    async with httpx2.AsyncClient() as browser:
        page = await browser.get(ended_at)
    assert page.status_code == 200 and "received the login for linear" in page.text, page.text
    assert page.headers["cache-control"] == "no-store"
    return ended_at, parse_qs(urlsplit(ended_at).query)["code"][0]


async def logged_in_and_signed_in(fake: FakeBotApi, *, after: int = 0) -> None:
    """The group is told the login connected the server, and the owner's call of its tool is signed in."""
    logged = await fake.wait_reply(GROUP_ID, "Logged in to linear", after=after, timeout=WAIT)
    assert "connected" in logged.text, logged.text
    fake.send(GROUP, "linear__whoami", sender=OWNER)
    await fake.wait_reply(GROUP_ID, "signed in", after=after, timeout=WAIT)


@asynccontextmanager
async def loopback(
    fake: FakeBotApi, *, access_ttl: int = 3600
) -> AsyncIterator[tuple[RunningServer, AuthorizationServer, RunningServer]]:
    """``fake`` served, an authorization server whose access tokens live ``access_ttl`` seconds, and
    the MCP server it protects."""
    async with (
        serve_asgi(fake.app()) as api,
        authorization_server(access_ttl=access_ttl) as auth,
        protected_server(auth) as mcp,
    ):
        yield api, auth, mcp


def assert_nowhere(secrets: set[str], fake: FakeBotApi, stderr: Path, data_dir: Path) -> None:
    """No secret in the log, in any request the fake Bot API received, or in any file but the sealed
    store (the workspace's servers.json, and the private copy of it that detects a rollback)."""
    texts = {
        "the log": stderr.read_text(errors="replace"),
        "the Bot API requests": "\n".join(json.dumps(call.params) for call in fake.calls),
    }
    for path in data_dir.rglob("*"):
        if path.is_file() and path.name != "servers.json":
            texts[str(path)] = path.read_text(errors="replace")
    for where, text in texts.items():
        assert leaks(secrets, text) == [], where


async def test_a_group_owner_logs_in_through_the_public_callback_and_the_tokens_refresh_survive_a_restart_and_are_revoked(
    tmp_path: Path,
) -> None:
    fake, data_dir, stderr = owned_group(tmp_path)
    port, public = public_url()
    secrets: set[str] = set()
    with anyio.fail_after(TEST_TIMEOUT):
        # Access tokens live 30 s, within the refresh margin: every connect refreshes first.
        async with (
            loopback(fake, access_ttl=30) as (api, auth, mcp),
            anyio.create_task_group() as delivery,
        ):
            delivery.start_soon(fake.post_to_webhook)
            bot = public_bot(api.url, data_dir, stderr, port, public)
            async with bot() as process:
                await fake.wait_call("setWebhook", timeout=WAIT)
                fake.send(GROUP, f"/mcp_add linear {mcp.url}", sender=OWNER)
                added = await fake.wait_reply(GROUP_ID, "needs a login", timeout=WAIT)
                assert "I sent you the link to log in to linear in our private chat" in added.text
                # Sent before the reply said so.
                private = await fake.wait_reply(OWNER_ID, "Log in to linear", timeout=WAIT)
                assert fake.calls.index(private) < fake.calls.index(added)
                link = link_in(private.text)
                assert "--paste" not in private.text  # the public callback is reachable
                assert all(link not in text for text in fake.texts(GROUP_ID))

                ended_at, code = await login_received(link, public)
                secrets.add(code)
                async with httpx2.AsyncClient() as browser:
                    replayed = await browser.get(ended_at)
                    assert "unknown, used or expired" in replayed.text
                await logged_in_and_signed_in(fake)
                first = stored_grant(data_dir)
                secrets |= first.secrets
                assert await stopped(process) == 0

            # After a restart the sealed tokens are refreshed at the first connect: no login.
            async with bot() as process:
                mark = fake.mark()
                await fake.wait_call("setWebhook", after=mark, timeout=WAIT)
                fake.send(GROUP, "linear__whoami", sender=OWNER)
                await fake.wait_reply(GROUP_ID, "signed in", after=mark, timeout=WAIT)
                second = stored_grant(data_dir)
                secrets |= second.secrets
                assert second.tokens is not None and first.tokens is not None
                assert second.tokens.access_token != first.tokens.access_token
                assert second.tokens.refresh_token

                fake.send(GROUP, "/mcp_remove linear", sender=OWNER)
                removed = await fake.wait_reply(GROUP_ID, "Removed linear", after=mark, timeout=WAIT)
                assert "Its tokens were revoked" in removed.text, removed.text
                assert not await introspect(auth, second.tokens.access_token)
                assert not await introspect(auth, second.tokens.refresh_token)
                assert await stopped(process) == 0
            delivery.cancel_scope.cancel()
    assert len(secrets) >= 5  # the code, and two access and refresh tokens
    assert_nowhere(secrets, fake, stderr, data_dir)


async def test_without_a_public_url_the_owner_pastes_the_address_and_a_group_owner_without_a_private_chat_is_told(
    tmp_path: Path,
) -> None:
    fake, data_dir, stderr = owned_group(tmp_path)
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            loopback(fake) as (api, _, mcp),
            run_bot_process(TOKEN, api.url, data_dir, stderr) as process,
        ):
            await fake.wait_call("getUpdates", timeout=WAIT)
            # The owner never opened a private chat with the bot: the group is told to.
            fake.no_private_chat.add(OWNER_ID)
            fake.send(GROUP, f"/mcp_add linear {mcp.url}", sender=OWNER)
            told = await fake.wait_reply(GROUP_ID, "Start a private chat with me first", timeout=WAIT)
            assert "/mcp_auth linear" in told.text
            # The command's reply itself says it: no link went out, and why.
            assert told.text.startswith("Added linear: this server needs a login. I could not send"), (
                told.text
            )
            fake.no_private_chat.clear()

            mark = fake.mark()
            fake.send(GROUP, "/mcp_auth linear", sender=OWNER)
            private = await fake.wait_reply(OWNER_ID, "Log in to linear", after=mark, timeout=WAIT)
            assert "/mcp_auth linear --paste" in private.text
            ended_at = await sign_in_elsewhere(link_in(private.text))
            code = parse_qs(urlsplit(ended_at).query)["code"][0]

            fake.send(GROUP, "/mcp_auth linear --paste", sender=OWNER)
            question = await fake.wait_reply(GROUP_ID, "Send the address", after=mark, timeout=WAIT)
            answer_id = fake.send(GROUP, ended_at, sender=OWNER, reply_to=question)
            await fake.wait_call("deleteMessage", after=mark, chat_id=GROUP_ID, message_id=answer_id)
            await fake.wait_reply(GROUP_ID, "Playa received the login for linear", after=mark, timeout=WAIT)
            await logged_in_and_signed_in(fake, after=mark)
            secrets = {code, *stored_grant(data_dir).secrets}
            assert await stopped(process) == 0
    assert_nowhere(secrets, fake, stderr, data_dir)


async def test_a_link_not_used_in_time_expires_with_a_message_to_the_owner_alone(tmp_path: Path) -> None:
    fake, data_dir, stderr = owned_group(tmp_path)
    expiry = 2.0  # the operator's setting: short, for the test
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            loopback(fake) as (api, _, mcp),
            run_bot_process(
                TOKEN, api.url, data_dir, stderr, extra_env={"PLAYA_OAUTH_LOGIN_TIMEOUT": f"{expiry:g}"}
            ) as process,
        ):
            await fake.wait_call("getUpdates", timeout=WAIT)
            asked_at = time.monotonic()  # the fake's clock: the link cannot expire before
            fake.send(GROUP, f"/mcp_add linear {mcp.url}", sender=OWNER)
            added = await fake.wait_reply(GROUP_ID, "needs a login", timeout=WAIT)
            assert "in our private chat: it works for 2 seconds" in added.text, added.text
            sent = await fake.wait_reply(OWNER_ID, "Log in to linear within 2 seconds", timeout=WAIT)
            link = link_in(sent.text)
            expired = await fake.wait_reply(OWNER_ID, "was not used within", timeout=WAIT)
            assert expired.at - asked_at >= expiry  # a lower bound: never sooner
            assert expired.text == (
                "The login link for linear was not used within 2 seconds. Run /mcp_auth linear for a new link."
            ), expired.text
            # The group learns nothing of the link: neither it nor its state.
            (state,) = parse_qs(urlsplit(link).query)["state"]
            group = fake.texts(GROUP_ID)
            assert all(link not in text and state not in text for text in group), group
            assert not any("was not used within" in text for text in group)

            # Used late, the link completes nothing.
            ended_at = await sign_in_elsewhere(link)
            mark = fake.mark()
            fake.send(GROUP, f"/mcp_auth linear {ended_at}", sender=OWNER)
            late = await fake.wait_reply(GROUP_ID, "unknown, used or expired", after=mark, timeout=WAIT)
            assert "Logged in" not in late.text
            fake.send(GROUP, "/mcp_list", sender=OWNER)
            listed = await fake.wait_reply(GROUP_ID, "linear: unavailable", after=mark, timeout=WAIT)
            assert listed.text.splitlines()[0] == (
                "linear: unavailable: this server needs a login — the owner can run /mcp_auth linear"
            ), listed.text
            assert await stopped(process) == 0


async def test_a_refresh_that_fails_leaves_the_server_waiting_for_the_owner_in_the_list_and_the_prompt(
    tmp_path: Path,
) -> None:
    fake, data_dir, stderr = owned_group(tmp_path)
    port, public = public_url()
    expired = "authorization expired — the owner can run /mcp_auth linear"
    with anyio.fail_after(TEST_TIMEOUT):
        # Access tokens live 30 s, within the refresh margin: every connect refreshes first.
        async with (
            loopback(fake, access_ttl=30) as (api, auth, mcp),
            serve_provider() as provider,
            anyio.create_task_group() as delivery,
        ):
            delivery.start_soon(fake.post_to_webhook)
            bot = public_bot(
                api.url,
                data_dir,
                stderr,
                port,
                public,
                PLAYA_MODEL="openai-chat:gpt-5.5",
                OPENAI_BASE_URL=provider.url,
                OPENAI_API_KEY=DUMMY_KEY,
            )
            async with bot() as process:
                await fake.wait_call("setWebhook", timeout=WAIT)
                fake.send(GROUP, f"/mcp_add linear {mcp.url}", sender=OWNER)
                private = await fake.wait_reply(OWNER_ID, "Log in to linear", timeout=WAIT)
                await login_received(link_in(private.text), public)
                logged = await fake.wait_reply(GROUP_ID, "Logged in to linear", timeout=WAIT)
                assert "connected" in logged.text, logged.text
                grant = stored_grant(data_dir)
                assert await stopped(process) == 0

            # The owner revokes Playa's access at the authorization server: the refresh is refused.
            assert grant.client is not None and grant.tokens is not None and grant.tokens.refresh_token
            async with httpx2.AsyncClient() as client:
                revoked = await client.post(
                    f"{auth.issuer}/token/revocation",
                    data={"token": grant.tokens.refresh_token, "client_id": grant.client.client_id},
                )
            assert revoked.status_code == 200

            async with bot() as process:
                mark = fake.mark()
                await fake.wait_call("setWebhook", after=mark, timeout=WAIT)
                provider.script(answer_text("noted"))
                fake.send(GROUP, "hello", sender=OWNER)
                await fake.wait_reply(GROUP_ID, "noted", after=mark, timeout=WAIT)
                (request,) = provider.requests
                assert f"linear: unavailable: {expired}" in json.dumps(request.body, ensure_ascii=False)
                fake.send(GROUP, "/mcp_list", sender=OWNER)
                listed = await fake.wait_reply(GROUP_ID, "linear: unavailable", after=mark, timeout=WAIT)
                assert listed.text.splitlines()[0] == f"linear: unavailable: {expired}", listed.text
                assert "next retry" not in listed.text  # a timer cannot log in
                assert await stopped(process) == 0
            delivery.cancel_scope.cancel()
    assert_nowhere(grant.secrets, fake, stderr, data_dir)


async def test_in_polling_mode_a_public_url_serves_the_login_redirect_on_a_listener_of_its_own(
    tmp_path: Path,
) -> None:
    fake, data_dir, stderr = owned_group(tmp_path)
    port, public = public_url()
    secrets: set[str] = set()
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            loopback(fake) as (api, _, mcp),
            run_bot_process(
                TOKEN,
                api.url,
                data_dir,
                stderr,
                extra_env={"PLAYA_PUBLIC_URL": public, "PLAYA_LISTEN": f"127.0.0.1:{port}"},
            ) as process,
        ):
            await fake.wait_call("getUpdates", timeout=WAIT)  # polling: no webhook
            fake.send(GROUP, f"/mcp_add linear {mcp.url}", sender=OWNER)
            private = await fake.wait_reply(OWNER_ID, "Log in to linear", timeout=WAIT)
            assert "--paste" not in private.text  # the public callback is reachable
            _, code = await login_received(link_in(private.text), public)
            secrets.add(code)
            async with httpx2.AsyncClient() as browser:
                # The listener serves the redirect and nothing else.
                other = await browser.post(f"{public}/hook", json={})
                assert other.status_code == 404
            await logged_in_and_signed_in(fake)
            assert not fake.find("setWebhook")
            secrets |= stored_grant(data_dir).secrets
            assert await stopped(process) == 0
    assert_nowhere(secrets, fake, stderr, data_dir)


async def test_a_pasted_redirect_is_deleted_and_a_token_refusal_quoting_the_code_reaches_the_group_in_fixed_words(
    tmp_path: Path,
) -> None:
    fake, data_dir, stderr = owned_group(tmp_path)
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            serve_asgi(fake.app()) as api,
            echo_oauth_server(refuse=True) as server,
            run_bot_process(TOKEN, api.url, data_dir, stderr) as process,
        ):
            await fake.wait_call("getUpdates", timeout=WAIT)
            fake.send(GROUP, f"/mcp_add echo {server.url}", sender=OWNER)
            private = await fake.wait_reply(OWNER_ID, "Log in to echo", timeout=WAIT)
            async with httpx2.AsyncClient() as browser:
                ended_at = (await browser.get(link_in(private.text))).headers["location"]

            # The owner forgets --paste and sends the address as a plain message in the group:
            # it is deleted, never reaches the model, and completes the login all the same.
            mark = fake.mark()
            pasted = fake.send(GROUP, ended_at, sender=OWNER)
            await fake.wait_call("deleteMessage", after=mark, chat_id=GROUP_ID, message_id=pasted)
            await fake.wait_reply(GROUP_ID, "Playa received the login for echo", after=mark, timeout=WAIT)

            # The token endpoint refuses, quoting the code and the verifier: the group is told in
            # Playa's words; the server's own, redacted, go to the owner's private chat alone.
            failed = await fake.wait_reply(GROUP_ID, "The login to echo failed", after=mark, timeout=WAIT)
            assert failed.text == (
                "The login to echo failed: the authorization server refused to issue tokens (invalid_grant)."
            ), failed.text
            said = await fake.wait_reply(OWNER_ID, "What the authorization server said", after=mark)
            assert "[redacted]" in said.text
            assert await stopped(process) == 0
    to_group = "\n".join(json.dumps(c.params) for c in fake.calls if c.chat_id in (GROUP_ID, str(GROUP_ID)))
    assert INSTRUCTION not in to_group and "was refused" not in to_group
    assert server.codes and server.verifiers
    # (The state is in the link the owner was sent: it stands for nothing without the code.)
    assert_nowhere(set(server.secrets), fake, stderr, data_dir)


async def test_a_call_refused_for_a_scope_in_a_group_sends_the_owner_a_link_in_their_private_chat(
    tmp_path: Path,
) -> None:
    fake, data_dir, stderr = owned_group(tmp_path)
    member = user(8)
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            serve_asgi(fake.app()) as api,
            authorization_server() as auth,
            protected_server(auth, step_up=True) as mcp,
            run_bot_process(TOKEN, api.url, data_dir, stderr) as process,
        ):
            await fake.wait_call("getUpdates", timeout=WAIT)
            fake.send(GROUP, f"/mcp_add notes {mcp.url}", sender=OWNER)
            private = await fake.wait_reply(OWNER_ID, "Log in to notes", timeout=WAIT)
            fake.send(GROUP, await sign_in_elsewhere(link_in(private.text)), sender=OWNER)
            await fake.wait_reply(GROUP_ID, "Logged in to notes: connected", timeout=WAIT)

            # A member's message makes the agent call a tool the token lacks a scope for: the
            # owner is sent the link in their private chat; the group learns only that they were.
            mark = fake.mark()
            fake.send(GROUP, "notes__publish", sender=member)
            link = await fake.wait_reply(OWNER_ID, "Log in to notes", after=mark, timeout=WAIT)
            (scope,) = parse_qs(urlsplit(link_in(link.text)).query)["scope"]
            assert "mcp:write" in scope.split()
            told = await fake.wait_reply(GROUP_ID, "The owner was sent a link", after=mark, timeout=WAIT)
            assert auth.issuer not in told.text
            assert all(auth.issuer not in text for text in fake.texts(GROUP_ID))
            assert await stopped(process) == 0
    assert " ERROR " not in stderr.read_text(errors="replace")
