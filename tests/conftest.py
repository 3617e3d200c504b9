from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import settings

from playa.agent import Host, HostConfig

# The property tests draw the same examples on every run, so a red run can be repeated and CI
# never turns red on a draw that happened to be new; `./dev test --hypothesis-profile=explore`
# draws new ones. No deadline: this suite runs in parallel on small, noisy machines.
settings.register_profile("repeatable", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile("repeatable")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _hypothesis_regex_imported_early() -> None:
    """Import hypothesis's regex strategies once per session, at a shallow stack.

    Hypothesis imports them lazily on the first ``from_regex``, and pytest rewrites hypothesis's
    modules as they are imported; deep inside a test, CPython 3.11.7's compiler can then fail
    with "SystemError: AST constructor recursion depth mismatch".
    """
    importlib.import_module("hypothesis.strategies._internal.regex")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def offline_host(data_dir: Path) -> AsyncIterator[Host]:
    async with Host(HostConfig(data_dir=data_dir)) as host:
        yield host
