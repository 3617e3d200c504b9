"""A machine client's private key in the console: asked in secret, taken on one line, and never
printed or logged, by the real ``playa chat`` through a pipe at DEBUG."""

from __future__ import annotations

from pathlib import Path

import pytest

from servers.machine_oauth import machine_oauth_server
from support.client_keys import new_client_key
from support.console import added_in_secret, assert_nothing_leaks

pytestmark = pytest.mark.anyio


async def test_the_client_key_is_asked_in_secret_on_one_line_and_never_printed_or_logged(
    tmp_path: Path,
) -> None:
    key, pem, lines = new_client_key()
    async with machine_oauth_server(client_id="svc", public_key=key.public_key()) as server:
        add = f"/mcp_add bot {server.url} --client-id svc --grant client-credentials --client-key"
        one_line = "".join(pem.splitlines())  # the key on one line, as `tr -d '\n' < key.pem` gives it
        done = await added_in_secret(
            tmp_path, "bot", add, one_line, asked="Send the private key (PEM)", whoami="a machine"
        )
    assert any("client_assertion=" in request for request in server.home.requests)
    assert_nothing_leaks(done, tmp_path, [pem.strip(), *lines])
