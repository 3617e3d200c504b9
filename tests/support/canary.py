"""What the real-process canary suites share: a `playa chat` run and the files a run left."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from support.providers import ProviderServer

HOST_SECRET = "canary-host-secret-" + "s" * 20


def files_under(folder: Path) -> list[tuple[Path, bytes]]:
    """Every file below ``folder``, with its bytes: the oracle reads them all."""
    return [(path, path.read_bytes()) for path in folder.rglob("*") if path.is_file()]


def run_console(
    data_dir: Path,
    provider: ProviderServer,
    lines: list[str],
    level: str,
    env: Mapping[str, str] = {},
) -> subprocess.CompletedProcess[bytes]:
    """``playa chat`` in a process of its own, its model the loopback ``provider``, fed ``lines``."""
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PLAYA_", "MCP_"))},
        "OPENAI_BASE_URL": provider.url,
        "OPENAI_API_KEY": "test-provider-key",
        "MCP_ENCRYPTION_SECRET": HOST_SECRET,
        "PLAYA_LOG_LEVEL": level,
        "PLAYA_CONNECT_TIMEOUT": "20",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "playa", "chat", "--data-dir", str(data_dir), "--model", "openai-chat:gpt-5"],
        input="".join(line + "\n" for line in lines).encode(),
        capture_output=True,
        timeout=240,
        env=environment,
        check=False,
    )
