"""Enterprise-managed authorization in the console: the owner's ID token asked in secret, and
never printed or logged, by the real ``playa chat`` through a pipe at DEBUG."""

from __future__ import annotations

from pathlib import Path

import pytest

from servers.enterprise_oauth import CLIENT_ID, IDP_CLIENT_ID, enterprise_oauth_server
from support.console import assert_nothing_leaks, debug_chat

pytestmark = pytest.mark.anyio

SECRET = "cs-" + "Rt6Yp1Qm8Wz3Kx5Nc9Lb2Vd4"


async def test_the_id_token_is_asked_in_secret_and_never_printed_or_logged(tmp_path: Path) -> None:
    async with enterprise_oauth_server(secret=SECRET) as server:
        typed = [
            f"/mcp_add corp {server.url} --client-id {CLIENT_ID} --client-secret {SECRET} --grant enterprise "
            f"--idp {server.idp} --idp-client-id {IDP_CLIENT_ID} --id-token",
            server.id_token,
            "corp__whoami",
        ]
        done = await debug_chat(tmp_path, typed)
    assert done.returncode == 0, done.stderr
    assert "Send your ID token from" in done.stdout
    assert "Added corp: connected" in done.stdout, done.stdout
    assert "corp__whoami returned:\nan enterprise user" in done.stdout
    assert len(server.idp_requests) == 1 and server.jags
    assert "HTTP Request" in done.stderr  # the DEBUG log is there to be searched
    assert_nothing_leaks(done, tmp_path, [server.id_token, SECRET, *server.jags])
