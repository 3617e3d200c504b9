"""Run npm ``oidc-provider`` (an OpenID Certified authorization server) on loopback, for tests.

Usage::

    async with authorization_server(access_ttl=3600) as auth:
        auth.issuer            # http://127.0.0.1:PORT
        auth.introspect_secret # the "mcp-server" client's secret, for token introspection
        auth.static_secret     # the secret of the pre-registered client STATIC_CLIENT_ID
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from servers.node import node_server, require_node_modules

__all__ = ["STATIC_CLIENT_ID", "AuthorizationServer", "authorization_server"]

_SCRIPT = Path(__file__).resolve().parent / "oidc_provider.mjs"


STATIC_CLIENT_ID = "playa-static"


@dataclass(frozen=True)
class AuthorizationServer:
    issuer: str
    introspect_secret: str
    static_secret: str
    """The client secret of the pre-registered client ``STATIC_CLIENT_ID`` (client_secret_basic)."""


@asynccontextmanager
async def authorization_server(*, access_ttl: int = 3600) -> AsyncIterator[AuthorizationServer]:
    require_node_modules()
    secret = secrets.token_urlsafe(24)
    static_secret = "cs-" + secrets.token_urlsafe(24)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "ACCESS_TTL": str(access_ttl),
        "INTROSPECT_SECRET": secret,
        "STATIC_SECRET": static_secret,
        "NODE_ENV": "development",
    }
    async with node_server("oidc-provider", ["node", str(_SCRIPT)], env, cwd=_SCRIPT.parent) as port:
        yield AuthorizationServer(f"http://127.0.0.1:{port}", secret, static_secret)
