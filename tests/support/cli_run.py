"""The real ``playa`` command in a child process, as the operator runs it, on a database or not."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

__all__ = ["RUN_TIMEOUT", "on_database", "playa", "playa_output"]

RUN_TIMEOUT = 120.0
"""Bounds one run of the command, start to exit (a busy two-core machine)."""


def playa(
    *args: str, env: Mapping[str, str], stdin: str = "", timeout: float = RUN_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """``playa`` with ``args`` in the environment ``env``, ``stdin`` typed: its exit and output."""
    return subprocess.run(
        [sys.executable, "-m", "playa", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=timeout,
        check=False,
    )


def playa_output(*args: str, env: Mapping[str, str], stdin: str = "") -> tuple[int, str]:
    """``playa`` with ``args``: its exit code, and everything it wrote (its output, then its log)."""
    done = playa(*args, env=env, stdin=stdin)
    return done.returncode, done.stdout + done.stderr


def on_database(database_url: str, secret: str, **settings: str) -> dict[str, str]:
    """This process's environment but its own host secret and bot token: the host secret
    ``secret`` instead, the database at ``database_url``, and ``settings``."""
    kept = {k: v for k, v in os.environ.items() if k not in ("MCP_ENCRYPTION_SECRET", "TELEGRAM_BOT_TOKEN")}
    return kept | {"PLAYA_DATABASE_URL": database_url, "MCP_ENCRYPTION_SECRET": secret, **settings}
