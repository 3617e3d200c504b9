"""The remote-MCP tests' own fixture; the host secret, the hosts and the owner's chat are shared
by every folder (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from anyio.abc import TaskGroup


@pytest.fixture
async def task_group() -> AsyncIterator[TaskGroup]:
    """A task group for connections, cancelled when the test ends."""
    async with anyio.create_task_group() as tg:
        yield tg
        tg.cancel_scope.cancel()
