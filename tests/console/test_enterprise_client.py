"""Enterprise-managed authorization in the console: the owner's ID token asked in secret, and
never printed or logged, by the real ``playa chat`` through a pipe at DEBUG."""

from __future__ import annotations

from pathlib import Path

import pytest

from servers.enterprise_oauth import CLIENT_ID, IDP_CLIENT_ID, enterprise_oauth_server
from support.console import added_in_secret, assert_nothing_leaks

pytestmark = pytest.mark.anyio

SECRET = "cs-" + "Rt6Yp1Qm8Wz3Kx5Nc9Lb2Vd4"


async def test_the_id_token_is_asked_in_secret_and_never_printed_or_logged(tmp_path: Path) -> None:
    async with enterprise_oauth_server(secret=SECRET) as server:
        add = (
            f"/mcp_add corp {server.url} --client-id {CLIENT_ID} --client-secret {SECRET} --grant enterprise "
            f"--idp {server.idp} --idp-client-id {IDP_CLIENT_ID} --id-token"
        )
        done = await added_in_secret(
            tmp_path,
            "corp",
            add,
            server.id_token,
            asked="Send your ID token from",
            whoami="an enterprise user",
        )
    assert len(server.idp_requests) == 1 and server.jags
    assert_nothing_leaks(done, tmp_path, [server.id_token, SECRET, *server.jags])
