"""The fixtures every test folder shares: a data folder, the host secret, hosts and the owner's chat
on them (the factories behind them are in ``support.host`` and ``support.remote``)."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from hypothesis import settings

from playa.agent import Host
from playa.mcp_remote import HostSecret, resolve_host_secret
from servers.python_servers import RunningServer
from support.chat import RecordingModel
from support.host import new_host, remote_host
from support.remote import AddedServer, OwnerChat, demo_server

# The property tests draw the same examples on every run, so a red run can be repeated and CI
# never turns red on a draw that happened to be new; `./dev test --hypothesis-profile=explore`
# draws new ones. No deadline: this suite runs in parallel on small, noisy machines.
settings.register_profile("repeatable", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile("repeatable")

SETUP_TIMEOUT = 60.0
"""The bound on a fixture's own set-up against healthy loopback servers, on a busy machine."""


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
    """A running host with no extension and the offline model."""
    async with new_host(data_dir) as host:
        yield host


@pytest.fixture
def host_secret(data_dir: Path) -> HostSecret:
    secret = resolve_host_secret({"MCP_ENCRYPTION_SECRET": "x" * 32}, data_dir=data_dir, allow_generate=False)
    assert isinstance(secret, HostSecret)
    return secret


@pytest.fixture
def recording_model() -> RecordingModel:
    """The offline model, recording what it was given at every step."""
    return RecordingModel()


@pytest.fixture
async def remote_mcp_host(
    data_dir: Path, host_secret: HostSecret, recording_model: RecordingModel
) -> AsyncIterator[Host]:
    """A running host with the remote-MCP extension, its model ``recording_model``."""
    async with remote_host(data_dir, host_secret, recording_model) as host:
        yield host


@pytest.fixture
def chat(remote_mcp_host: Host) -> OwnerChat:
    """The owner's chat ``console:t`` on ``remote_mcp_host``."""
    return OwnerChat(remote_mcp_host, "console:t")


@pytest.fixture
def demo_token() -> str:
    """The bearer token of ``demo``."""
    return "demo-" + uuid.uuid4().hex


@pytest.fixture
async def demo(demo_token: str) -> AsyncIterator[RunningServer]:
    """Playa's demo server on loopback, protected by ``demo_token``."""
    async with demo_server(demo_token) as server:
        yield server


@pytest.fixture
async def demo_added(demo: RunningServer, demo_token: str, chat: OwnerChat) -> AddedServer:
    """``demo`` added to ``chat`` with its bearer token: its 5 tools pinned. (The server outlives
    the host: it is set up first, so it is closed last.)"""
    with anyio.fail_after(SETUP_TIMEOUT):
        added = await chat.command(f"/mcp_add demo {demo.url} --bearer {demo_token}")
    assert added.startswith("Added demo: connected"), added
    return AddedServer(chat, demo, "demo", demo_token, added)
