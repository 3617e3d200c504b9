"""The shared set-ups do what their names say: a test that uses one stands on it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from playa.agent import ModelLimits
from playa.exceptions import ConfigError
from playa.mcp_remote import HostSecret, RemoteMcpExtension
from playa.mcp_remote.store import Sealer, ServerStore
from support.chat import RecordingModel, Script
from support.host import HEALTHY, Clock, host_config, new_host, remote_host
from support.remote import AddedServer, OwnerChat

pytestmark = pytest.mark.anyio


def test_a_host_config_runs_the_offline_model_unless_told_otherwise(data_dir: Path) -> None:
    assert host_config(data_dir).model == "offline"
    assert host_config(data_dir, "test").model == "test"
    script = Script([])
    assert host_config(data_dir, script, hook_timeout=5.0).hook_timeout == 5.0
    assert (
        host_config(data_dir, RecordingModel(), model_limits=ModelLimits(timeout=30)).model_limits.timeout
        == 30
    )
    with pytest.raises(ConfigError, match="session_idle must be a positive number"):
        host_config(data_dir, session_idle=0)


def test_a_remote_host_has_the_extension_only_with_timeouts_for_a_busy_machine(
    data_dir: Path, host_secret: HostSecret
) -> None:
    clock = Clock(5.0)
    host = remote_host(data_dir, host_secret, clock=clock, hook_timeout=7.0)
    (extension,) = host.extensions
    assert isinstance(extension, RemoteMcpExtension)
    assert extension.settings.connection == HEALTHY
    assert new_host(data_dir).extensions == []
    clock.advance(2.5)
    assert clock() == 7.5


async def test_the_demo_server_is_added_to_the_owners_chat_with_its_tools_pinned(
    demo_added: AddedServer, chat: OwnerChat, recording_model: RecordingModel, host_secret: HostSecret
) -> None:
    assert demo_added.chat is chat
    assert demo_added.added.startswith("Added demo: connected over streamable-http, 5 tools")
    with anyio.fail_after(60):
        await chat.say("hello")
        session = await chat.session()
        store = ServerStore(
            session.workspace, chat.scope, Sealer(host_secret.value), state_dir=session.state_dir
        )
        entry = (await anyio.to_thread.run_sync(store.load)).entry("demo")
    assert "demo__whoami" in recording_model.tools()
    assert entry is not None and entry.pins is not None
    assert set(entry.pins.tools) == {"whoami", "echo", "add", "tiny_image", "fail"}
    assert f"Bearer {demo_added.token}" in entry.secrets
