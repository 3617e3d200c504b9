"""Enterprise-managed authorization in the console: the owner's ID token asked in secret, and
never printed or logged, by the real ``playa chat`` through a pipe at DEBUG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from servers.enterprise_oauth import CLIENT_ID, IDP_CLIENT_ID, enterprise_oauth_server
from support.canary import console_environment
from support.leaks import leaks
from support.oauth import every_file

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

        def run() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "playa", "chat", "--data-dir", str(tmp_path)],
                input="".join(line + "\n" for line in typed),
                capture_output=True,
                text=True,
                timeout=90,
                env=console_environment("DEBUG", {"PLAYA_EGRESS_ALLOW": "127.0.0.1/32"}),
                check=False,
            )

        done = await anyio.to_thread.run_sync(run)
    assert done.returncode == 0, done.stderr
    assert "Send your ID token from" in done.stdout
    assert "Added corp: connected" in done.stdout, done.stdout
    assert "corp__whoami returned:\nan enterprise user" in done.stdout
    assert len(server.idp_requests) == 1 and server.jags
    assert "HTTP Request" in done.stderr  # the DEBUG log is there to be searched
    for where, text in {"stdout": done.stdout, "stderr": done.stderr, **every_file(tmp_path)}.items():
        assert leaks([server.id_token, SECRET, *server.jags], text) == [], where
