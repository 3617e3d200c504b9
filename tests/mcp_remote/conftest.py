from __future__ import annotations

from pathlib import Path

import pytest

from playa.mcp_remote import HostSecret, resolve_host_secret


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def host_secret(data_dir: Path) -> HostSecret:
    secret = resolve_host_secret({"MCP_ENCRYPTION_SECRET": "x" * 32}, data_dir=data_dir, allow_generate=False)
    assert isinstance(secret, HostSecret)
    return secret
