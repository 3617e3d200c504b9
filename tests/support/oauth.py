"""OAuth on loopback for tests: a real authorization server (npm oidc-provider) protecting an SDK MCP server.

The owner's browser is played with httpx2: it opens the link Playa sent privately, signs in and
consents on the authorization server's own pages, and its last redirect reaches Playa's callback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import anyio
import httpx2
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from playa._asgi import bind
from playa.agent import Host
from playa.core import ChatSession
from playa.mcp_remote import HostSecret, RemoteMcpSettings
from playa.mcp_remote.store import Sealer, ServerEntry, ServerStore
from servers.oidc import AuthorizationServer, authorization_server
from servers.python_servers import LOOPBACK, PostFilter, RunningServer, json_or_none, send_answer, serve_asgi
from support.chat import RecordingModel, ScriptedUI, msg
from support.remote import SETTINGS, remote_host

__all__ = [
    "SCOPE",
    "Introspection",
    "OwnerUI",
    "StepUp",
    "every_file",
    "introspect",
    "link_in",
    "log_in",
    "log_in_again",
    "protected_chat",
    "protected_server",
    "refuse_sign_in",
    "sign_in",
    "sign_in_elsewhere",
]


SCOPE = "console:oauth"
"""The owner's chat that logs in, unless a test says otherwise."""


class Introspection:
    """The MCP server's token check: RFC 7662 introspection at the authorization server."""

    def __init__(self, auth: AuthorizationServer, resource: str) -> None:
        self._auth = auth
        self._resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx2.AsyncClient(timeout=60.0) as client:
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


@asynccontextmanager
async def protected_server(
    auth: AuthorizationServer,
    *,
    write_scope: str | None = None,
    list_scope: str | None = None,
    step_up: bool = False,
) -> AsyncIterator[RunningServer]:
    """An SDK MCP server that takes only tokens the authorization server issued for it.

    With ``write_scope``, its ``write`` tool needs that scope too, which the authorization
    server never grants: a call is answered 403 ``insufficient_scope`` naming it (RFC 6750 §3.1).
    With ``list_scope``, listing its tools does. With ``step_up``, it has ``publish`` and
    ``delete`` too (see ``StepUp``).
    """
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

    @server.tool()
    def write(text: str) -> str:
        """Write a file (needs the write scope, when the server has one)."""
        return "written"

    if step_up:

        @server.tool()
        def publish() -> str:
            """Publish (needs the mcp:write scope)."""
            return "published"

        @server.tool()
        def delete() -> str:
            """Delete (needs a scope the authorization server never grants here)."""
            return "deleted"

    app: ASGIApp = server.streamable_http_app(host=LOOPBACK)
    origin = f"http://{LOOPBACK}:{sock.getsockname()[1]}"
    if step_up:
        app = StepUp(app, Introspection(auth, url), f"{origin}/.well-known/oauth-protected-resource/mcp")
    if write_scope is not None:
        app = _Scoped(app, ("tools/call", "write"), write_scope, origin)
    if list_scope is not None:
        app = _Scoped(app, ("tools/list", None), list_scope, origin)
    async with serve_asgi(app, sock=sock, path="/mcp") as running:
        yield running


class StepUp(PostFilter):
    """ASGI middleware: ``publish`` needs the ``mcp:write`` scope, ``delete`` a scope nobody is granted.

    Either call without it is refused with 403 ``insufficient_scope`` naming the scopes it needs
    (RFC 6750 3.1), as a server does for one operation that needs more than the others.
    """

    NEEDS: ClassVar[dict[str, str]] = {"publish": "mcp mcp:write", "delete": "mcp:write"}

    def __init__(self, app: ASGIApp, introspection: Introspection, metadata_url: str) -> None:
        super().__init__(app)
        self._introspection = introspection
        self._metadata_url = metadata_url

    async def answer(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        payload = json_or_none(body)
        params = payload.get("params") if isinstance(payload, dict) else None
        name = params.get("name") if isinstance(params, dict) and payload["method"] == "tools/call" else None
        if name not in self.NEEDS:
            return False
        given = dict(scope["headers"]).get(b"authorization", b"").decode()
        token = await self._introspection.verify_token(given.removeprefix("Bearer "))
        if name != "delete" and token is not None and "mcp:write" in token.scopes:
            return False
        challenge = (
            f'Bearer error="insufficient_scope", scope="{self.NEEDS[name]}", '
            f'resource_metadata="{self._metadata_url}"'
        )
        await send_answer(
            send, 403, b'{"error": "insufficient_scope"}', [(b"www-authenticate", challenge.encode())]
        )
        return True


class _Scoped(PostFilter):
    """ASGI middleware: one request (a method, and a tool's name) is refused for want of a scope no token has."""

    def __init__(self, app: ASGIApp, request: tuple[str, str | None], scope: str, origin: str) -> None:
        super().__init__(app)
        self._request, self._scope, self._origin = request, scope, origin

    async def answer(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        request = json_or_none(body)
        if not (
            isinstance(request, dict)
            and request.get("method") == self._request[0]
            and (self._request[1] is None or (request.get("params") or {}).get("name") == self._request[1])
        ):
            return False
        challenge = (
            f'Bearer error="insufficient_scope", scope="{self._scope}", '
            f'resource_metadata="{self._origin}/.well-known/oauth-protected-resource/mcp", '
            'error_description="this tool needs more access"'
        )
        await Response(status_code=403, headers={"WWW-Authenticate": challenge})(scope, receive, send)
        return True


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
        return link_in(text)


def link_in(text: str) -> str:
    """The authorization link in the message that carries it: the line of its own that is a URL."""
    (link,) = [line for line in text.splitlines() if line.startswith("http")]
    return link


async def sign_in_elsewhere(link: str) -> str:
    """The owner's browser on another machine: signs in, and ends at a redirect to Playa's loopback
    callback that it cannot reach; returns that address (what the owner pastes)."""
    async with httpx2.AsyncClient(timeout=60.0) as browser:
        response = await browser.get(link)
        for _ in range(20):
            if response.is_redirect:
                location = str(response.request.url.join(response.headers["location"]))
                if "/oauth/callback" in location:
                    return location
                response = await browser.get(location)
            elif "/interaction/" in str(response.url):
                prompt = "login" if 'name="login"' in response.text else "consent"
                data = (
                    {"prompt": prompt, "login": "owner", "password": "pw"}
                    if prompt == "login"
                    else {"prompt": prompt}
                )
                response = await browser.post(str(response.url), data=data)
            else:
                raise AssertionError(f"the sign-in stopped at {response.url}: {response.text[:200]}")
    raise AssertionError("the sign-in never reached the callback")


async def sign_in(link: str) -> httpx2.Response:
    """The owner's browser: the authorization server's sign-in and consent, then Playa's callback."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=60.0) as browser:
        page = await browser.get(link)
        assert "/interaction/" in str(page.url), page.text[:200]
        page = await browser.post(str(page.url), data={"prompt": "login", "login": "owner", "password": "pw"})
        if "/interaction/" in str(page.url):
            page = await browser.post(str(page.url), data={"prompt": "consent"})
        return page


async def refuse_sign_in(link: str) -> httpx2.Response:
    """The owner's browser: signs in, then cancels at the authorization server, which redirects to
    Playa's callback with ``error=access_denied``."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=60.0) as browser:
        page = await browser.get(link)
        assert "/interaction/" in str(page.url), page.text[:200]
        return await browser.get(str(page.url).rstrip("/") + "/abort")


@asynccontextmanager
async def protected_chat(
    data_dir: Path,
    secret: HostSecret,
    model: RecordingModel | None = None,
    settings: RemoteMcpSettings = SETTINGS,
    *,
    scope: str = SCOPE,
    access_ttl: int = 3600,
    write_scope: str | None = None,
    list_scope: str | None = None,
    step_up: bool = False,
) -> AsyncIterator[tuple[AuthorizationServer, RunningServer, Host, ChatSession]]:
    """An authorization server, the MCP server it protects (see ``protected_server``), a host with
    the remote-MCP extension, and the owner's chat ``scope`` on it."""
    async with (
        authorization_server(access_ttl=access_ttl) as auth,
        protected_server(auth, write_scope=write_scope, list_scope=list_scope, step_up=step_up) as mcp,
        remote_host(data_dir, secret, model, settings) as host,
    ):
        yield auth, mcp, host, await host.session(scope, owner="owner")


def sealed_entry(workspace: Path, secret: HostSecret) -> ServerEntry:
    """The one server entry sealed in the server file of chat ``SCOPE``, whose workspace this is."""
    (entry,) = ServerStore(workspace, SCOPE, Sealer(secret.value)).load().entries
    return entry


def every_file(root: Path) -> dict[str, str]:
    """Every file Playa wrote under its data dir (history, workspace, sealed store), as text."""
    return {str(p): p.read_text(errors="replace") for p in root.rglob("*") if p.is_file()}


async def introspect(auth: AuthorizationServer, token: str) -> bool:
    """Whether the authorization server still takes ``token`` (RFC 7662 introspection)."""
    async with httpx2.AsyncClient(timeout=60.0) as client:
        answer = await client.post(
            f"{auth.issuer}/token/introspection",
            data={"token": token},
            auth=("mcp-server", auth.introspect_secret),
        )
    return bool(answer.json().get("active"))


async def log_in(
    host: Host, session: ChatSession, url: str, name: str = "linear", *, outcome: str = "connected"
) -> OwnerUI:
    """``/mcp_add`` a server that needs a login, and sign in with the link the owner was sent; the
    chat then says ``Logged in to <name>: <outcome>…``."""
    ui = OwnerUI()
    added = await host.handle(session, msg(f"/mcp_add {name} {url}"), ui)
    assert added is not None and "needs a login" in added.text, added
    await ui.link.wait()
    await sign_in(ui.link_url())
    await ui.said.wait()
    assert ui.sent[-1].startswith(f"Logged in to {name}: {outcome}"), ui.sent
    return ui


async def log_in_again(
    host: Host,
    session: ChatSession,
    ui: OwnerUI,
    name: str = "linear",
    *,
    browser: Callable[[str], Awaitable[object]] = sign_in,
) -> str:
    """``/mcp_auth`` for a new login, the owner's ``browser`` taking the new link; what the chat says then."""
    ui.link, ui.said = anyio.Event(), anyio.Event()
    await host.handle(session, msg(f"/mcp_auth {name}"), ui)
    await ui.link.wait()
    await browser(link_in(ui.private[-1]))
    await ui.said.wait()
    return ui.sent[-1]
