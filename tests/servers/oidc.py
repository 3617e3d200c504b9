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
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from servers.node import _drain, _stop, _wait_for_port, require_node_modules

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
    process = await anyio.open_process(
        ["node", str(_SCRIPT)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=_SCRIPT.parent,
        start_new_session=True,
    )
    try:
        port = await _wait_for_port(process)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, process)
            try:
                yield AuthorizationServer(f"http://127.0.0.1:{port}", secret, static_secret)
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)
