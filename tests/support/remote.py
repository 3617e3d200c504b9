"""A host with the remote-MCP extension, for tests: timeouts a healthy server meets on a busy machine,
and the owner's chat on that host."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from playa.agent import Host, HostConfig, Reply
from playa.core import ChatSession
from playa.mcp_remote import ConnectionSettings, HostSecret, RemoteMcpExtension, RemoteMcpSettings
from support.chat import RecordingModel, ScriptedUI, msg

__all__ = ["HEALTHY", "SETTINGS", "OwnerChat", "owner_chat", "remote_host"]

HEALTHY = ConnectionSettings(connect_timeout=15.0, call_timeout=15.0, close_timeout=5.0)
"""Generous for the healthy loopback servers tests use: a busy machine must not fail them."""
SETTINGS = RemoteMcpSettings(connection=HEALTHY)


def remote_host(
    data_dir: Path,
    secret: HostSecret,
    model: RecordingModel | None = None,
    settings: RemoteMcpSettings = SETTINGS,
    *,
    clock: Callable[[], float] = time.time,
) -> Host:
    """A host with the remote-MCP extension only; its model ``model``'s, or the offline one."""
    extension = RemoteMcpExtension(secret, settings=settings, clock=clock)
    return Host(HostConfig(data_dir=data_dir, model=model.model() if model else "offline"), [extension])


@dataclass
class OwnerChat:
    """The owner's chat on ``host``: each message goes to the chat's session as it is then."""

    host: Host
    scope: str

    @property
    def extension(self) -> RemoteMcpExtension:
        (extension,) = self.host.extensions
        assert isinstance(extension, RemoteMcpExtension)
        return extension

    async def session(self) -> ChatSession:
        return await self.host.session(self.scope, owner="owner")

    async def say(self, text: str, ui: ScriptedUI | None = None) -> Reply:
        """The owner's message (a command or a turn), and the reply it got."""
        reply = await self.host.handle(await self.session(), msg(text), ui or ScriptedUI())
        assert reply is not None
        return reply

    async def command(self, text: str, ui: ScriptedUI | None = None) -> str:
        """The owner's command, and the text of its reply."""
        return (await self.say(text, ui)).text


@asynccontextmanager
async def owner_chat(
    data_dir: Path,
    secret: HostSecret,
    scope: str,
    model: RecordingModel | None = None,
    settings: RemoteMcpSettings = SETTINGS,
    *,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[OwnerChat]:
    """``remote_host`` running, and the owner's chat ``scope`` on it."""
    async with remote_host(data_dir, secret, model, settings, clock=clock) as host:
        yield OwnerChat(host, scope)
