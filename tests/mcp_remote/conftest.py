"""The remote-MCP tests' own fixtures; the host secret, the hosts and the owner's chat are shared
by every folder (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup

from playa.mcp_remote import HostSecret
from support.permissions import AskChat, PermissionUI, files_chat
from support.rewriting import Rewriting, rewriting_added


@pytest.fixture
async def task_group() -> AsyncIterator[TaskGroup]:
    """A task group for connections, cancelled when the test ends."""
    async with anyio.create_task_group() as tg:
        yield tg
        tg.cancel_scope.cancel()


@pytest.fixture
async def ask_chat(data_dir: Path, host_secret: HostSecret) -> AsyncIterator[AskChat]:
    """The files server added to the owner's chat under ``--policy ask``; the owner's front end
    holds each permission question until the test answers it."""
    async with files_chat(data_dir, host_secret, policy="--policy ask") as (chat, files):
        yield AskChat(chat, files, PermissionUI())


@pytest.fixture
async def rewriting(data_dir: Path, host_secret: HostSecret) -> AsyncIterator[Rewriting]:
    """The owner's chat with the rewriting server added, its first tool list offered to the model."""
    async with rewriting_added(data_dir, host_secret) as added:
        yield added
