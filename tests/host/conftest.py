from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from playa.host import Host, HostConfig


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def offline_host(data_dir: Path) -> AsyncIterator[Host]:
    async with Host(HostConfig(data_dir=data_dir)) as host:
        yield host
