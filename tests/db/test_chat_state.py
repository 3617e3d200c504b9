"""``playa chat`` with ``PLAYA_DATABASE_URL``: a chat's servers and history live in PostgreSQL.

The real command in a pipe, a real MCP server (``playa demo-server``) and a real database: a
server added in one run is there, verified, after a restart, and neither it nor the history
was written to the data dir.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from playa.db import Database, DatabaseUrl
from support.cli_run import RUN_TIMEOUT, on_database, playa_output
from support.db_text import database_text

pytestmark = pytest.mark.anyio

SERVER_LINE = re.compile(r"Playa demo MCP server: (?P<url>http://127\.0\.0\.1:\d+/mcp)")


@pytest.fixture
def demo_server() -> Iterator[tuple[str, str]]:
    """``playa demo-server`` on a free loopback port: its URL and its bearer token."""
    token = f"demo-token-{secrets.token_hex(16)}"
    process = subprocess.Popen(
        [sys.executable, "-m", "playa", "demo-server", "--port", "0", "--token", token],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    killer = threading.Timer(RUN_TIMEOUT, process.kill)  # bounds the wait for its first line
    killer.start()
    try:
        match = SERVER_LINE.search(process.stdout.readline())
        killer.cancel()
        assert match, "the demo server did not announce its URL"
        yield match["url"], token
    finally:
        killer.cancel()
        process.kill()
        process.wait(timeout=30)


async def test_a_console_chat_keeps_its_servers_and_history_in_the_database(
    database_url: str, demo_server: tuple[str, str], tmp_path: Path
) -> None:
    url, token = demo_server
    data = tmp_path / "data"
    env = on_database(database_url, secrets.token_hex(32))
    chat = ["chat", "--data-dir", str(data)]

    code, output = playa_output(*chat, env=env, stdin="hello\n")
    assert code == 2 and "run playa db upgrade" in output  # no chat on a schema it does not know
    code, output = playa_output("db", "upgrade", env=env)
    assert code == 0, output

    code, output = playa_output(
        *chat, env=env, stdin=f"/mcp_add demo {url} --bearer\n{token}\nremember the word tangerine\n"
    )
    assert code == 0, output
    assert "Added demo: connected over streamable-http" in output

    code, output = playa_output(*chat, env=env, stdin="/mcp_list\n")
    assert code == 0, output
    assert "demo" in output and "auth headers: Authorization" in output
    assert "not used" not in output and "does not verify" not in output
    assert token not in output

    # Nothing of the chat is in the data dir: its servers, history and audit log are all rows.
    kept = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file())
    assert kept == [], kept

    async with await Database.open(DatabaseUrl.parse(database_url)) as database:
        async with database.connection() as c:
            servers = await c.fetch("SELECT chat, name FROM servers")
            history = await c.fetch("SELECT message FROM history ORDER BY seq")
            audited = await c.fetch("SELECT record FROM audit_records ORDER BY seq")
        everything = await database_text(database)
    assert [(r["chat"].split(":")[0], r["name"]) for r in servers] == [("console", "demo")]
    assert any(b"tangerine" in r["message"] for r in history)
    assert any(b'"kind":"server_added"' in r["record"] for r in audited), audited
    assert "127.0.0.1" in everything  # the scan sees the rows' bytes
    assert token not in everything
