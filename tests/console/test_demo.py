"""`playa chat --demo`: the first README command shows a remote server working, end to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

DEMO_LINE = re.compile(r"running at (?P<url>http://127\.0\.0\.1:\d+/mcp) \(bearer token: (?P<token>[^)]+)\)")


def test_the_demo_flag_serves_a_server_that_the_chat_connects_to(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MCP_ENCRYPTION_SECRET", "TELEGRAM_BOT_TOKEN")}
    process = subprocess.Popen(
        [sys.executable, "-m", "playa", "chat", "--demo", "--data-dir", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    killer = threading.Timer(60, process.kill)  # bounds the whole exchange
    killer.start()
    try:
        first = process.stdout.readline()
        match = DEMO_LINE.search(first)
        assert match, first
        url, token = match["url"], match["token"]
        process.stdin.write(f"/mcp_add demo {url} --bearer\n{token}\ndemo__whoami\n/mcp_list\n")
        process.stdin.close()
        output = process.stdout.read()
        process.wait(timeout=30)
    finally:
        killer.cancel()
        process.kill()
    assert process.returncode == 0
    assert "Added demo: connected over streamable-http, 5 tools" in output
    assert '"authorization": "[redacted]"' in output
    assert token not in output
    assert "auth headers: Authorization" in output
