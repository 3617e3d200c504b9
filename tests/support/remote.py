"""The owner's chat on a host with the remote-MCP extension, and a server the owner added to it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from playa.agent import Host, Reply
from playa.core import ChatSession
from playa.demo_server import build_app
from playa.mcp_remote import HostSecret, RemoteMcpExtension, RemoteMcpSettings
from servers.python_servers import RunningServer, serve_asgi
from support.chat import ScriptedUI, msg
from support.host import HEALTHY, SETTINGS, ModelSource, remote_host

__all__ = ["HEALTHY", "SETTINGS", "AddedServer", "OwnerChat", "demo_server", "owner_chat", "remote_host"]


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

    async def say(self, text: str, ui: ScriptedUI | None = None, *, ref: int | None = None) -> Reply:
        """The owner's message (a command or a turn), and the reply it got; ``ref`` the message's
        reference in the chat, for a front end that deletes it."""
        reply = await self.host.handle(await self.session(), msg(text, ref=ref), ui or ScriptedUI())
        assert reply is not None
        return reply

    async def command(self, text: str, ui: ScriptedUI | None = None, *, ref: int | None = None) -> str:
        """The owner's command, and the text of its reply."""
        return (await self.say(text, ui, ref=ref)).text


@asynccontextmanager
async def owner_chat(
    data_dir: Path,
    secret: HostSecret,
    scope: str,
    model: ModelSource | None = None,
    settings: RemoteMcpSettings = SETTINGS,
    *,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[OwnerChat]:
    """``remote_host`` running, and the owner's chat ``scope`` on it."""
    async with remote_host(data_dir, secret, model, settings, clock=clock) as host:
        yield OwnerChat(host, scope)


@asynccontextmanager
async def demo_server(token: str, *, port: int = 0) -> AsyncIterator[RunningServer]:
    """Playa's demo server on loopback (bearer-protected; ``whoami`` echoes the request headers)."""
    async with serve_asgi(build_app(token, transport="streamable-http"), port=port, path="/mcp") as server:
        yield server


@dataclass
class AddedServer:
    """A server running on loopback that the owner added to ``chat``: its tools are pinned."""

    chat: OwnerChat
    server: RunningServer
    name: str
    token: str
    added: str
    """The reply to the ``/mcp_add``."""
