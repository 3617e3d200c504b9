"""A real ``playa telegram`` process against the fake Bot API, for tests that stop and restart it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from anyio.abc import Process

__all__ = ["free_port", "run_bot_process", "stopped"]


@asynccontextmanager
async def run_bot_process(
    token: str,
    fake_url: str,
    data_dir: Path,
    stderr: Path,
    *,
    webhook_port: int | None = None,
    webhook_url: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> AsyncIterator[Process]:
    """``playa telegram`` at DEBUG, its log in ``stderr``; with ``webhook_port``, by webhook on that port,
    registered as ``webhook_url`` (default: the port's own URL; several processes behind one proxy
    register the proxy's). ``extra_env`` adds to or overrides the environment (``PLAYA_DATABASE_URL``)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PLAYA_", "TELEGRAM_", "MCP_"))},
        "TELEGRAM_BOT_TOKEN": token,
        "PLAYA_TELEGRAM_BASE_URL": fake_url,
        "PLAYA_DATA_DIR": str(data_dir),
        "PLAYA_EGRESS_ALLOW": "127.0.0.1/32",
        "PLAYA_TELEGRAM_STOP_GRACE": "1",
        "PLAYA_LOG_LEVEL": "DEBUG",
        "NO_PROXY": "*",
        **(extra_env or {}),
    }
    command = [sys.executable, "-m", "playa", "telegram"]
    if webhook_port is not None:
        url = webhook_url or f"http://127.0.0.1:{webhook_port}/hook"
        command += [
            "--webhook-url",
            url,
            "--webhook-listen",
            "127.0.0.1",
            "--webhook-port",
            str(webhook_port),
        ]
    with stderr.open("ab") as err:
        process = await anyio.open_process(command, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True), anyio.fail_after(10):
                await process.wait()


async def stopped(process: Process) -> int:
    """SIGTERM, then the exit code once the process is gone."""
    process.send_signal(signal.SIGTERM)
    with anyio.fail_after(30):
        return await process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
