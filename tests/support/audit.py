"""A chat's audit log as the tests write, read and verify it: the conftest's host secret, a
log written the way a chat writes it, and ``playa audit`` run as the operator runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio

from playa.core import session_state_dir
from playa.mcp_remote import AuditKey, audit_folder
from playa.mcp_remote.store import AuditLog

SECRET = "x" * 32  # the conftest's host secret
SCOPE = "console:audited"
HEADER_CANARY = "Hk7Tq2Wm9Xz4Lp6Rv3Ns8Bd1Fg5Jc0Ya"
ARGUMENT_CANARY = "arg-canary-Qe4Uo8Iy2Tr6Ew0Pl3Kj"


def folder_of(data_dir: Path, scope: str) -> Path:
    return audit_folder(session_state_dir(data_dir, scope))


async def write_log(data_dir: Path, scope: str, count: int) -> Path:
    """A log of ``count`` tool calls for ``scope``, written the way a chat writes it."""
    folder = folder_of(data_dir, scope)
    async with anyio.create_task_group() as tg:
        log = AuditLog(folder, scope, AuditKey(SECRET.encode()), task_group=tg)
        for n in range(count):
            log.record("tool_call", server="docs", tool=f"tool{n}", outcome="ok", duration_us=n)
        await log.flush()
    return folder


def playa_audit(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "playa", "audit", *args, "--data-dir", str(data_dir)],
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "MCP_ENCRYPTION_SECRET": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def lines_of(folder: Path) -> list[bytes]:
    return (folder / "audit.jsonl").read_bytes().splitlines(keepends=True)


def edited(line: bytes) -> bytes:
    """A record's line with its outcome changed (and its MAC left as it was)."""
    record = json.loads(line)
    record["fields"]["outcome"] = "error"
    return json.dumps(record).encode() + b"\n"
