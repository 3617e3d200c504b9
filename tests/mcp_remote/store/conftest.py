from __future__ import annotations

from pathlib import Path

import pytest

from playa.mcp_remote.store import ServerStore
from support.store import ALL, new_store, private_store


@pytest.fixture
def store(tmp_path: Path) -> ServerStore:
    """A store holding the three entries, without a private folder."""
    s = new_store(tmp_path)
    s.save(ALL)
    return s


@pytest.fixture
def guarded(tmp_path: Path) -> ServerStore:
    """A store holding the three entries, with its copy and record in the private folder."""
    s = private_store(tmp_path)
    s.save(ALL)
    return s
