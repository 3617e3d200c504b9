"""A Playa host with the ``mcp-remote`` extension, set up the way the benchmarks need it."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import anyio

from bench._common import ROOT
from playa.agent import Host, HostConfig
from playa.core import (
    Answer,
    Approval,
    ChatSession,
    IncomingMessage,
    MessageRef,
    Panel,
    Question,
    Sender,
    scope_folder,
    session_state_dir,
)
from playa.mcp_remote import (
    Connector,
    HostSecret,
    RemoteMcpExtension,
    RemoteMcpSettings,
    ServerEntry,
    ServerStore,
    resolve_host_secret,
)
from playa.mcp_remote.store import Sealer

OWNER = Sender(id="owner", name="Owner", is_owner=True)
TOKEN = "bench-token-0123456789abcdef0123456789"
"""Every server gets this bearer token, so the chat's redactor runs on every result, as in real use."""


class QuietUI:
    """A front end that shows nothing and answers no question."""

    private_place = "above"

    async def send(self, text: str) -> MessageRef | None:
        return None

    async def send_private(self, text: str) -> MessageRef | None:
        return None

    async def ask(self, question: str, *, secret: bool = False, timeout: float = 300.0) -> str | None:
        return None

    async def question(self, question: Question, *, timeout: float = 300.0) -> Answer:
        return Answer("cancel")

    async def approval(self, approval: Approval) -> MessageRef | None:
        return None

    async def panel(self, panel: Panel) -> MessageRef | None:
        return None

    async def delete(self, ref: MessageRef) -> bool:
        return True

    async def notify(self, text: str) -> None:
        return None

    async def progress(self, key: str, text: str) -> None:
        return None


def message(text: str) -> IncomingMessage:
    return IncomingMessage(text=text, sender=OWNER)


ECHO_TURN = 'a__echo {"text": "hello"}'
"""The scale benchmark's turn: the offline model calls server ``a``'s echo tool."""


async def timed_echo_turns(host: Host, session: ChatSession, count: int) -> list[float]:
    """Run ``count`` echo turns in ``session`` and return their wall times in seconds.

    The history grows with every turn, as in real use (the context window bounds what a request
    sends of it).
    """
    ui = QuietUI()
    times: list[float] = []
    for _ in range(count):
        began = anyio.current_time()
        reply = await host.handle(session, message(ECHO_TURN), ui)
        times.append(anyio.current_time() - began)
        assert reply is not None and "hello" in reply.text, reply
    return times


async def alternating_turns(
    host: Host,
    chats: tuple[ChatSession, ChatSession],
    turns: int,
    *,
    after: Callable[[int], Awaitable[None]] | None = None,
) -> tuple[list[float], list[float]]:
    """Time ``turns`` "hello" turns in each of two chats, which goes first alternating.

    ``after(turn)`` runs after each pair. Returns each chat's wall times in seconds.
    """
    ui = QuietUI()
    times: tuple[list[float], list[float]] = ([], [])
    for turn in range(turns):
        order = [0, 1] if turn % 2 == 0 else [1, 0]
        for side in order:
            began = anyio.current_time()
            await host.handle(chats[side], message("hello"), ui)
            times[side].append(anyio.current_time() - began)
        if after is not None:
            await after(turn)
    return times


@contextlib.contextmanager
def data_dir() -> Iterator[Path]:
    """A data dir beside the repository: a real disk, so every turn's fsync costs what it costs."""
    path = Path(tempfile.mkdtemp(prefix=".bench-data-", dir=ROOT))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def host_secret(data: Path) -> HostSecret:
    secret = resolve_host_secret({"MCP_ENCRYPTION_SECRET": "b" * 32}, data_dir=data, allow_generate=False)
    assert isinstance(secret, HostSecret)
    return secret


def token_of(scope: str) -> str:
    """A chat's own bearer token: as in real use, no two chats share a credential, so what each
    new credential costs (the chat's redactor, the log gate) is paid for every chat."""
    return f"{TOKEN}-{hashlib.sha256(scope.encode()).hexdigest()[:16]}"


def entry(name: str, url: str, token: str = TOKEN) -> ServerEntry:
    return ServerEntry(
        name=name,
        url=url,
        transport="streamable-http",
        auth_kind="bearer",
        headers={"Authorization": f"Bearer {token}"},
    )


def write_servers(data: Path, scope: str, entries: list[ServerEntry]) -> None:
    """Seal ``entries`` into the chat's server file before its session starts, as Playa saved them:
    with the copy and the record in the chat's private folder, which a chat that ran before has."""
    workspace = data / "workspaces" / scope_folder(scope)
    workspace.mkdir(parents=True, exist_ok=True)
    sealer = Sealer(host_secret(data).value)
    ServerStore(workspace, scope, sealer, state_dir=session_state_dir(data, scope)).save(entries)


@contextlib.asynccontextmanager
async def playa_host(
    data: Path, settings: RemoteMcpSettings, *, clock: Callable[[], float] = time.time
) -> AsyncIterator[tuple[Host, RemoteMcpExtension]]:
    """``clock``: what the extension reads the time by (when a backoff has passed)."""
    extension = RemoteMcpExtension(
        host_secret(data), settings=settings, connector=Connector(settings.connection), clock=clock
    )
    async with Host(HostConfig(data_dir=data), [extension]) as host:
        yield host, extension


@contextlib.asynccontextmanager
async def playa_in_tmp(settings: RemoteMcpSettings) -> AsyncIterator[tuple[Host, RemoteMcpExtension]]:
    """``playa_host`` in a fresh data dir that is removed afterwards."""
    with data_dir() as data:
        async with playa_host(data, settings) as pair:
            yield pair


async def unaudited_session(host: Host, extension: RemoteMcpExtension, scope: str) -> ChatSession:
    """A chat of ``host`` whose servers are set up without the audit key: it keeps no audit log.

    The baseline for what a chat's audit log costs (every chat of a host with a secret keeps one).
    """
    key, extension._audit_key = extension._audit_key, None
    try:
        session = await host.session(scope, owner="owner")
        assert not extension.chat(session).audit.enabled
    finally:
        extension._audit_key = key
    return session
