from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup

from playa.mcp_remote import HostSecret, resolve_host_secret


@pytest.fixture
def host_secret(data_dir: Path) -> HostSecret:
    secret = resolve_host_secret({"MCP_ENCRYPTION_SECRET": "x" * 32}, data_dir=data_dir, allow_generate=False)
    assert isinstance(secret, HostSecret)
    return secret


@pytest.fixture
async def task_group() -> AsyncIterator[TaskGroup]:
    """A task group for connections, cancelled when the test ends."""
    async with anyio.create_task_group() as tg:
        yield tg
        tg.cancel_scope.cancel()
