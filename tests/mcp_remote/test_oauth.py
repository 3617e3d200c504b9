"""OAuth end to end: a real authorization server (npm oidc-provider) protecting an SDK MCP server.

The test plays the owner's browser with httpx2: it opens the link Playa sent privately, signs in
and consents on the authorization server's own pages, and its last redirect reaches Playa's
loopback callback listener.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from playa._asgi import bind
from playa.host import Host, HostConfig, encoded_forms
from playa.mcp_remote import ConnectionSettings, HostSecret, RemoteMcpExtension, RemoteMcpSettings
from playa.mcp_remote._seal import Sealer
from playa.mcp_remote._store import ServerStore
from servers.oidc import AuthorizationServer, authorization_server
from servers.python_servers import LOOPBACK, RunningServer, buffered, json_or_none, serve_asgi, serve_mcp
from support.chat import RecordingModel, ScriptedUI, msg

pytestmark = [pytest.mark.anyio, pytest.mark.npm]

SCOPE = "console:oauth"
SETTINGS = RemoteMcpSettings(
    connection=ConnectionSettings(connect_timeout=15.0, call_timeout=15.0, close_timeout=5.0)
)
TEST_TIMEOUT = 60.0


class Introspection:
    """The MCP server's token check: RFC 7662 introspection at the authorization server."""

    def __init__(self, auth: AuthorizationServer, resource: str) -> None:
        self._auth = auth
        self._resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx2.AsyncClient() as client:
            answer = await client.post(
                f"{self._auth.issuer}/token/introspection",
                data={"token": token},
                auth=("mcp-server", self._auth.introspect_secret),
            )
        info = answer.json()
        if not info.get("active"):
            return None
        audience = info.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        return AccessToken(
            token=token,
            client_id=info["client_id"],
            scopes=str(info.get("scope", "")).split(),
            expires_at=info.get("exp"),
            resource=self._resource if self._resource in audiences else None,
            subject=info.get("sub"),
        )


class StepUp:
    """ASGI middleware: ``publish`` needs the ``mcp:write`` scope, ``delete`` a scope nobody is granted.

    Either call without it is refused with 403 ``insufficient_scope`` naming the scopes it needs
    (RFC 6750 3.1), as a server does for one operation that needs more than the others.
    """

    NEEDS: ClassVar[dict[str, str]] = {"publish": "mcp mcp:write", "delete": "mcp:write"}

    def __init__(self, app: ASGIApp, introspection: Introspection, metadata_url: str) -> None:
        self._app = app
        self._introspection = introspection
        self._metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        body, replay = await buffered(receive)
        payload = json_or_none(body)
        params = payload.get("params") if isinstance(payload, dict) else None
        name = params.get("name") if isinstance(params, dict) and payload["method"] == "tools/call" else None
        if name in self.NEEDS:
            given = dict(scope["headers"]).get(b"authorization", b"").decode()
            token = await self._introspection.verify_token(given.removeprefix("Bearer "))
            if name == "delete" or token is None or "mcp:write" not in token.scopes:
                challenge = (
                    f'Bearer error="insufficient_scope", scope="{self.NEEDS[name]}", '
                    f'resource_metadata="{self._metadata_url}"'
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", challenge.encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b'{"error": "insufficient_scope"}'})
                return
        await self._app(scope, replay, send)


@asynccontextmanager
async def protected_server(
    auth: AuthorizationServer, *, step_up: bool = False
) -> AsyncIterator[RunningServer]:
    """An SDK MCP server that takes only tokens the authorization server issued for it."""
    sock = bind(LOOPBACK, 0)
    url = f"http://{LOOPBACK}:{sock.getsockname()[1]}/mcp"
    server = MCPServer(
        "protected",
        token_verifier=Introspection(auth, url),
        auth=AuthSettings(
            issuer_url=auth.issuer,
            resource_server_url=url,
            required_scopes=["mcp"],
            validate_token_resource=True,
        ),
    )

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Who the token says the caller is."""
        return "signed in"

    app: ASGIApp = server.streamable_http_app(host=LOOPBACK)
    if step_up:

        @server.tool()
        def publish() -> str:
            """Publish (needs the mcp:write scope)."""
            return "published"

        @server.tool()
        def delete() -> str:
            """Delete (needs a scope the authorization server never grants here)."""
            return "deleted"

        app = StepUp(
            app,
            Introspection(auth, url),
            f"http://{LOOPBACK}:{sock.getsockname()[1]}/.well-known/oauth-protected-resource/mcp",
        )
    async with serve_asgi(app, sock=sock, path="/mcp") as running:
        yield running


@dataclass
class OwnerUI(ScriptedUI):
    """The owner's console: events for the private link and for the chat's next message."""

    link: anyio.Event = field(default_factory=anyio.Event)
    said: anyio.Event = field(default_factory=anyio.Event)

    async def send_private(self, text: str) -> object:
        ref = await super().send_private(text)
        self.link.set()
        return ref

    async def send(self, text: str) -> object:
        ref = await super().send(text)
        self.said.set()
        return ref

    def link_url(self) -> str:
        (text,) = self.private
        return text.splitlines()[-1]


async def sign_in(link: str) -> httpx2.Response:
    """The owner's browser: the authorization server's sign-in and consent, then Playa's callback."""
    async with httpx2.AsyncClient(follow_redirects=True) as browser:
        page = await browser.get(link)
        assert "/interaction/" in str(page.url), page.text[:200]
        page = await browser.post(str(page.url), data={"prompt": "login", "login": "owner", "password": "pw"})
        if "/interaction/" in str(page.url):
            page = await browser.post(str(page.url), data={"prompt": "consent"})
        return page


def remote_host(
    data_dir: Path, secret: HostSecret, model: RecordingModel, settings: RemoteMcpSettings = SETTINGS
) -> Host:
    extension = RemoteMcpExtension(secret, settings=settings)
    return Host(HostConfig(data_dir=data_dir, model=model.model()), [extension])


def every_file(root: Path) -> dict[str, str]:
    """Every file Playa wrote under its data dir (history, workspace, sealed store), as text."""
    return {str(p): p.read_text(errors="replace") for p in root.rglob("*") if p.is_file()}


def sealed_secrets(data_dir: Path, secret: HostSecret, workspace: Path) -> frozenset[str]:
    (entry,) = ServerStore(workspace, SCOPE, Sealer(secret.value)).load().entries
    return entry.secrets


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
                assert added.text.startswith("Added linear: this server needs a login.")
                await ui.link.wait()
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
                assert ui.sent[-1] == "Logged in to linear: connected over streamable-http, 1 tools."

                called = await host.handle(session, msg("linear__whoami"), ScriptedUI())
                assert called is not None
                assert "signed in" in called.text

                # A replayed callback is refused.
                async with httpx2.AsyncClient() as browser:
                    replay = await browser.get(str(callback.url))
                assert "unknown, used or expired" in replay.text

                secrets = sealed_secrets(data_dir, host_secret, session.workspace)
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
                for value in secrets:
                    for form in encoded_forms(value):
                        for text in seen:
                            assert form not in text
                        for name, text in files.items():
                            assert form not in text, name

            # After a restart the stored tokens connect at once: no login.
            async with remote_host(data_dir, host_secret, RecordingModel()) as host:
                session = await host.session(SCOPE, owner="owner")
                await host.handle(session, msg("hello"), ScriptedUI())
                reply = await host.handle(session, msg("/mcp_list"), ScriptedUI())
                assert reply is not None
                assert reply.text.startswith("linear: connected over streamable-http, 1 tools"), reply.text
                called = await host.handle(session, msg("linear__whoami"), ScriptedUI())
                assert called is not None
                assert "signed in" in called.text


async def test_a_link_not_used_in_time_expires_with_a_clear_message(
    data_dir: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    started = time.monotonic()
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            authorization_server() as auth,
            protected_server(auth) as mcp,
            remote_host(data_dir, host_secret, model, replace(SETTINGS, login_timeout=0.5)) as host,
        ):
            session = await host.session(SCOPE, owner="owner")
            ui = OwnerUI()
            await host.handle(session, msg(f"/mcp_add linear {mcp.url} --oauth"), ui)
            await ui.link.wait()
            ui.said = anyio.Event()
            await ui.said.wait()
            assert time.monotonic() - started >= 0.5
            assert "was not used within" in ui.sent[-1]
            assert "/mcp_auth linear" in ui.sent[-1]
            callback = await sign_in(ui.link_url())
            assert "unknown, used or expired" in callback.text


async def test_tokens_are_refreshed_before_expiry_and_a_refused_refresh_waits_for_the_owner(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        # Tokens that live 30 s are within the 60 s refresh margin from the start: every connect
        # refreshes first, and the refreshed token outlives the connect.
        async with authorization_server(access_ttl=30) as auth, protected_server(auth) as mcp:
            async with remote_host(data_dir, host_secret, RecordingModel()) as host:
                session = await host.session(SCOPE, owner="owner")
                ui = OwnerUI()
                await host.handle(session, msg(f"/mcp_add linear {mcp.url}"), ui)
                await ui.link.wait()
                await sign_in(ui.link_url())
                await ui.said.wait()
                assert ui.sent[-1] == "Logged in to linear: connected over streamable-http, 1 tools."
                workspace = session.workspace
            store = ServerStore(workspace, SCOPE, Sealer(host_secret.value))
            (first,) = store.load().entries
            assert first.oauth is not None and first.oauth.tokens is not None

            # A restart connects with a refreshed token: the sealed one changes.
            async with remote_host(data_dir, host_secret, RecordingModel()) as host:
                session = await host.session(SCOPE, owner="owner")
                await host.handle(session, msg("hello"), ScriptedUI())
                listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
                assert listed is not None
                assert listed.text.startswith("linear: connected"), listed.text
            (second,) = store.load().entries
            assert second.oauth is not None and second.oauth.tokens is not None
            assert second.oauth.tokens.access_token != first.oauth.tokens.access_token

            # The owner revokes the grant at the authorization server: the refresh is refused.
            assert second.oauth.client is not None and second.oauth.tokens.refresh_token
            async with httpx2.AsyncClient() as client:
                revoked = await client.post(
                    f"{auth.issuer}/token/revocation",
                    data={
                        "token": second.oauth.tokens.refresh_token,
                        "client_id": second.oauth.client.client_id,
                    },
                )
            assert revoked.status_code == 200
            async with remote_host(data_dir, host_secret, RecordingModel()) as host:
                session = await host.session(SCOPE, owner="owner")
                await host.handle(session, msg("hello"), ScriptedUI())
                listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
                assert listed is not None
                first_line = listed.text.splitlines()[0]
                assert first_line == (
                    "linear: unavailable: authorization expired — the owner can run /mcp_auth linear"
                ), first_line
                assert "next retry" not in listed.text
                prompt = session.prompt.get("Remote MCP servers") or ""
                assert "authorization expired — the owner can run /mcp_auth linear" in prompt


async def test_a_call_refused_for_a_scope_waits_for_the_owners_login_with_the_wider_scope(
    data_dir: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            authorization_server() as auth,
            protected_server(auth, step_up=True) as mcp,
            remote_host(data_dir, host_secret, model := RecordingModel()) as host,
        ):
            session = await host.session(SCOPE, owner="owner")
            ui = OwnerUI()
            await host.handle(session, msg(f"/mcp_add notes {mcp.url}"), ui)
            await ui.link.wait()
            (first_scope,) = parse_qs(urlsplit(ui.link_url()).query)["scope"]
            assert "mcp:write" not in first_scope.split()
            await sign_in(ui.link_url())
            await ui.said.wait()
            assert ui.sent[-1] == "Logged in to notes: connected over streamable-http, 3 tools."
            first_grant = sealed_secrets(data_dir, host_secret, session.workspace)

            # The token lacks mcp:write: the call fails, and only the owner's login can help.
            refused = await host.handle(session, msg("notes__publish"), ScriptedUI())
            assert refused is not None
            needs = "this server needs a login with more permissions (mcp:write) — the owner can run /mcp_auth notes"
            assert needs in refused.text
            assert f"notes: unavailable: {needs}" in (session.prompt.get("Remote MCP servers") or "")
            listed = await host.handle(session, msg("/mcp_list"), ScriptedUI())
            assert listed is not None and "next retry" not in listed.text

            # The new login asks for what was granted and what the call needed (SEP-2350).
            ui.link, ui.said = anyio.Event(), anyio.Event()
            await host.handle(session, msg("/mcp_auth notes"), ui)
            await ui.link.wait()
            second_link = ui.private[-1].splitlines()[-1]
            (scope,) = parse_qs(urlsplit(second_link).query)["scope"]
            assert set(scope.split()) == {*first_scope.split(), "mcp:write"}
            await sign_in(second_link)
            await ui.said.wait()
            assert ui.sent[-1] == "Logged in to notes: connected over streamable-http, 3 tools."
            published = await host.handle(session, msg("notes__publish"), ScriptedUI())
            assert published is not None and "published" in published.text

            # A refusal for scopes the token holds already: no login can help, and none is asked for.
            private = len(ui.private)
            denied = await host.handle(session, msg("notes__delete"), ScriptedUI())
            assert denied is not None
            assert "HTTP 403" in denied.text and "/mcp_auth" not in denied.text
            assert len(ui.private) == private

            # Neither login's tokens nor either registration's secret shows anywhere: not to
            # the model, in a reply, a log line, or a file outside the seal.
            second_grant = sealed_secrets(data_dir, host_secret, session.workspace)
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
            for value in first_grant | second_grant:
                for form in encoded_forms(value):
                    assert all(form not in text for text in seen)
                    for name, text in files.items():
                        assert form not in text, name


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
            remote_host(data_dir, host_secret, RecordingModel()) as host,
        ):
            session = await host.session(SCOPE, owner="owner")
            ui = OwnerUI()
            added = await host.handle(session, msg(f"/mcp_add fixed {fixed.url}"), ui)
            assert added is not None and "this server needs a login" in added.text
            await ui.said.wait()
            assert ui.sent[-1].startswith("The login to fixed failed: ")
            assert ui.sent[-1].endswith(
                "It publishes no OAuth metadata: if it takes a fixed token, add it again with "
                "/mcp_add fixed <url> --bearer"
            )
            assert ui.private == []  # no link: there was nothing to log in to


async def test_a_fixed_callback_port_is_the_redirect_uri_the_login_registers_and_listens_on(
    data_dir: Path, host_secret: HostSecret
) -> None:
    sock = bind(LOOPBACK, 0)
    port = sock.getsockname()[1]
    sock.close()  # a free port, for the listener to take
    settings = replace(SETTINGS, oauth_callback_port=port)
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            authorization_server() as auth,
            protected_server(auth) as mcp,
            remote_host(data_dir, host_secret, RecordingModel(), settings) as host,
        ):
            session = await host.session(SCOPE, owner="owner")
            ui = OwnerUI()
            await host.handle(session, msg(f"/mcp_add linear {mcp.url}"), ui)
            await ui.link.wait()
            (redirect,) = parse_qs(urlsplit(ui.link_url()).query)["redirect_uri"]
            assert redirect == f"http://127.0.0.1:{port}/oauth/callback"
            callback = await sign_in(ui.link_url())
            assert callback.url.port == port and "received the login for linear" in callback.text
            await ui.said.wait()
            assert ui.sent[-1] == "Logged in to linear: connected over streamable-http, 1 tools."
