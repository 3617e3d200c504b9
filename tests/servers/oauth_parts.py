"""What the loopback OAuth test servers share: their sockets, the MCP server that takes only the
tokens they issued, an authorization server's lifespan and its token requests as received."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import parse_qs

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from playa._asgi import bind
from servers.python_servers import LOOPBACK

__all__ = ["IssuedTokens", "Issuing", "bind_origins", "kept_form", "lifespan_answered", "protected_mcp"]


def bind_origins(count: int) -> tuple[list[socket.socket], list[str]]:
    """``count`` sockets bound on loopback and their origins, for servers that must know their URLs
    before they serve."""
    sockets = [bind(LOOPBACK, 0) for _ in range(count)]
    return sockets, [f"http://{LOOPBACK}:{sock.getsockname()[1]}" for sock in sockets]


class Issuing(Protocol):
    """A test server's state: its MCP URL and the access tokens it issued."""

    @property
    def url(self) -> str: ...

    @property
    def tokens(self) -> set[str]: ...


@dataclass
class IssuedTokens:
    """The MCP server's token verifier: only a token ``server`` issued, for ``client_id``."""

    server: Issuing
    client_id: str

    async def verify_token(self, token: str) -> AccessToken | None:
        if token not in self.server.tokens:
            return None
        return AccessToken(token=token, client_id=self.client_id, scopes=["mcp"], resource=self.server.url)


def protected_mcp(name: str, server: Issuing, *, issuer: str, client_id: str) -> MCPServer:
    """An SDK MCP server named ``name`` at ``server.url`` that ``issuer`` protects: it takes only
    the tokens ``server`` issued, with the scope ``mcp`` and for its own URL."""
    return MCPServer(
        name,
        token_verifier=IssuedTokens(server, client_id),
        auth=AuthSettings.model_validate(
            {
                "issuer_url": issuer,
                "resource_server_url": server.url,
                "required_scopes": ["mcp"],
                "validate_token_resource": True,
            }
        ),
    )


async def lifespan_answered(scope: Scope, receive: Receive, send: Send) -> bool:
    """Answers the ASGI lifespan until its shutdown, when ``scope`` is one: whether it was."""
    if scope["type"] != "lifespan":
        return False
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})
    return True


async def kept_form(request: Request, kept: list[str]) -> tuple[str, dict[str, str]]:
    """A token request's body and its form; its Authorization header and body are added to ``kept``."""
    body = (await request.body()).decode()
    kept.append(f"{request.headers.get('authorization', '')}\n{body}")
    return body, {name: values[0] for name, values in parse_qs(body).items()}
