"""OAuth on loopback for tests: a real authorization server (npm oidc-provider) protecting an SDK MCP server.

The owner's browser is played with httpx2: it opens the link Playa sent privately, signs in and
consents on the authorization server's own pages, and its last redirect reaches Playa's callback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer

from playa._asgi import bind
from playa.host import ChatSession, Host, HostConfig
from playa.mcp_remote import ConnectionSettings, HostSecret, RemoteMcpExtension, RemoteMcpSettings
from servers.oidc import AuthorizationServer
from servers.python_servers import LOOPBACK, RunningServer, serve_asgi
from support.chat import RecordingModel, ScriptedUI, msg

__all__ = [
    "SETTINGS",
    "Introspection",
    "OwnerUI",
    "every_file",
    "introspect",
    "log_in",
    "protected_server",
    "remote_host",
    "sign_in",
]

SETTINGS = RemoteMcpSettings(
    connection=ConnectionSettings(connect_timeout=15.0, call_timeout=15.0, close_timeout=5.0)
)


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


@asynccontextmanager
async def protected_server(auth: AuthorizationServer) -> AsyncIterator[RunningServer]:
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

    async with serve_asgi(server.streamable_http_app(host=LOOPBACK), sock=sock, path="/mcp") as running:
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


async def introspect(auth: AuthorizationServer, token: str) -> bool:
    """Whether the authorization server still takes ``token`` (RFC 7662 introspection)."""
    async with httpx2.AsyncClient() as client:
        answer = await client.post(
            f"{auth.issuer}/token/introspection",
            data={"token": token},
            auth=("mcp-server", auth.introspect_secret),
        )
    return bool(answer.json().get("active"))


async def log_in(host: Host, session: ChatSession, url: str, name: str = "linear") -> OwnerUI:
    """``/mcp_add`` a server that needs a login, and sign in with the link the owner was sent."""
    ui = OwnerUI()
    added = await host.handle(session, msg(f"/mcp_add {name} {url}"), ui)
    assert added is not None and "needs a login" in added.text, added
    await ui.link.wait()
    await sign_in(ui.link_url())
    await ui.said.wait()
    assert ui.sent[-1].startswith(f"Logged in to {name}: connected"), ui.sent
    return ui
