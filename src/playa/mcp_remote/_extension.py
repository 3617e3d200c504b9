"""The ``mcp-remote`` extension: per-chat remote MCP servers, managed by the chat's owner."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final
from weakref import WeakKeyDictionary

import anyio
from anyio.abc import TaskGroup

from ..core import ChatSession, Command, Extension, Sender, ToolResultEvent
from ..exceptions import UsageError
from ._callback_listener import Callbacks
from ._chat import ChatServers
from ._login_relay import LoginRelay, LoginRows
from ._resources import ResourceTools
from ._settings import RemoteMcpSettings
from .commands import build_commands
from .store import (
    AuditKey,
    FileServers,
    HostSecret,
    LoadResult,
    NoHostSecret,
    RowMemory,
    RowServers,
    Sealer,
    ServerStorage,
    ServerStore,
    UnopenedFile,
    audit_folder,
    move_log,
    move_rows,
)
from .transport import Connector

__all__ = ["RemoteMcpExtension"]


class RemoteMcpExtension(Extension):
    """Lets each chat's owner connect remote MCP servers to the chat's agent.

    Without a host secret the extension still registers its commands, so a ``/mcp_add`` with a
    key never falls through to the model; they answer that remote MCP is disabled, and why.
    """

    id = "mcp-remote"

    def __init__(
        self,
        secret: HostSecret | NoHostSecret,
        *,
        settings: RemoteMcpSettings | None = None,
        connector: Connector | None = None,
        clock: Callable[[], float] = time.time,
        callbacks: Callbacks | None = None,
    ) -> None:
        """``callbacks`` is the OAuth redirect listener (default: loopback, on the settings' port)."""
        self.settings = settings or RemoteMcpSettings()
        self.connector = connector or Connector(self.settings.connection)
        self.disabled_reason = secret.reason if isinstance(secret, NoHostSecret) else None
        self._sealer = Sealer(secret.value) if isinstance(secret, HostSecret) else None
        self._audit_key = AuditKey(secret.value) if isinstance(secret, HostSecret) else None
        self._clock = clock
        self.callbacks = (
            callbacks if callbacks is not None else Callbacks(port=self.settings.oauth_callback_port)
        )
        self._chats: dict[str, ChatServers] = {}
        self._resources: dict[str, ResourceTools] = {}
        self._rows = RowMemory()
        """What this process remembers of the chats' server rows (with a database): their rollback check."""
        self._tg: TaskGroup | None = None
        self._opening: WeakKeyDictionary[ChatSession, _FileRead] = WeakKeyDictionary()
        """The sealed files read in the chats' opens, until SessionStart takes them."""

    def commands(self) -> Sequence[Command]:
        return build_commands(self.owner_servers, self._clock)

    async def owner_servers(self, session: ChatSession) -> ChatServers:
        """The chat's servers for an owner's command, picked up afresh from the file.

        Raises ``UsageError`` saying why when remote MCP is disabled (no host secret).
        """
        if self._sealer is None:
            raise UsageError(f"Remote MCP is disabled: {self.disabled_reason}")
        chat = self.chat(session)
        await chat.reconcile()
        return chat

    @property
    def min_hook_timeout(self) -> float:
        # BeforeAgentStart waits for connects in flight, each bounded by the connect timeout.
        return self.settings.connect_wait + 1.0

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        # Log records that quote a credential are redacted by the host's outbound gate, which
        # learns each chat's credentials as ChatServers does (its ChatSecrets).
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                chats = list(self._chats.values())
                self._chats.clear()
                self._tg = None
                # Every connection at once: the whole shutdown takes one close timeout.
                with anyio.CancelScope(shield=True):
                    async with anyio.create_task_group() as closing:
                        for chat in chats:
                            closing.start_soon(chat.close)
                tg.cancel_scope.cancel()

    @property
    def seal_key_id(self) -> str | None:
        """The id of the key the chats' servers are sealed with (None: disabled); not secret."""
        return self._sealer.key_id if self._sealer is not None else None

    def share_logins(self, rows: LoginRows, *, answer_wait: float = 5.0) -> None:
        """Several processes behind one public URL: a login's redirect may reach any of them.

        This process records its logins in ``rows`` (sealed with the host's key) and hands on the
        redirects of the others' logins; ``answer_wait`` is how long a browser whose redirect was
        handed on waits to be told how it went.
        """
        if self._sealer is not None and self.callbacks.public:
            self.callbacks.relay = LoginRelay(rows, self._sealer, answer_wait=answer_wait)

    def _storage(self, session: ChatSession, scope: str) -> ServerStorage:
        """Where the chat's servers are kept for ``scope``: the host's database, or the sealed file."""
        assert self._sealer is not None
        if session.storage is not None:
            return RowServers(session.storage.servers, scope, self._sealer, self._rows)
        return FileServers(ServerStore(session.workspace, scope, self._sealer, state_dir=session.state_dir))

    def session_opening(self, session: ChatSession) -> Callable[[], None] | None:
        """The sealed file's read, in the host's one hop of the chat's open (with files only: the
        database is read on the event loop); SessionStart picks the result up (``chat``)."""
        if self._sealer is None or session.storage is not None:
            return None
        opening = self._opening[session] = _FileRead(
            ServerStore(session.workspace, session.scope, self._sealer, state_dir=session.state_dir)
        )
        return opening

    def chat(self, session: ChatSession) -> ChatServers:
        """The servers of a chat, set up on first use."""
        chat = self._chats.get(session.scope)
        if chat is None:
            if self._tg is None:
                raise RuntimeError("the mcp-remote extension is used outside the host's lifespan")
            store: ServerStorage | None = None
            opened = None
            if (read := self._opening.pop(session, None)) is not None and (
                opened := read.opened()
            ) is not None:
                # Read in the open; ``reconcile`` reads again if the file changed since.
                store = FileServers(read.file)
            elif self._sealer is not None:
                store = self._storage(session, session.scope)
            chat = self._chats[session.scope] = ChatServers(
                session,
                store,
                connector=self.connector,
                settings=self.settings,
                task_group=self._tg,
                callbacks=self.callbacks,
                clock=self._clock,
                audit_key=self._audit_key,
                opened=opened,
            )
        return chat

    def resources(self, chat: ChatServers) -> ResourceTools:
        """The agent's resource tools of a chat's servers, set up on first use."""
        tools = self._resources.get(chat.session.scope)
        if tools is None or tools.servers is not chat.servers:
            if self._tg is None:
                raise RuntimeError("the mcp-remote extension is used outside the host's lifespan")
            connection = self.settings.connection
            tools = self._resources[chat.session.scope] = ResourceTools(
                chat.session,
                chat.servers,
                flows=chat.flow_guard,
                policies=chat.policies,
                audit=chat.audit,
                redactor=lambda: chat.redactor,
                task_group=self._tg,
                timeout=connection.call_timeout,
                max_pages=connection.max_tool_pages,
            )
        return tools

    async def on_session_start(self, session: ChatSession) -> None:
        # Connects run in the background: a session never waits for a server.
        await self.chat(session).reconcile()

    async def on_before_agent_start(self, session: ChatSession) -> None:
        chat = self.chat(session)
        chat.flow_guard.end_turn()  # a turn begins with no sources, whatever came before it
        await chat.before_turn()
        self.resources(chat).offer()

    async def on_tool_result(self, event: ToolResultEvent) -> None:
        # Every result of the chat, the workspace's too: the flow guard's sources of the turn.
        chat = self._chats.get(event.session.scope)
        if chat is not None and chat.session is event.session and chat.flow_guard.watching:
            chat.saw_result(event.tool_name, event.arguments, event.result)
            for source in self.resources(chat).sources(event.tool_name, event.arguments):
                chat.flow_guard.saw(source, event.result.text)

    def on_turn_end(self, session: ChatSession) -> None:
        chat = self._chats.get(session.scope)
        if chat is not None:
            chat.flow_guard.end_turn()

    def on_secret_deleted(self, session: ChatSession, sender: Sender, deleted: bool) -> None:
        """A message that carried a secret left the chat, or could not: who sent it, never what."""
        self.chat(session).audit.record("secret_deleted", sender=sender.id, deleted=deleted)

    async def on_scope_move(self, old_scope: str, session: ChatSession) -> None:
        """Re-seal the chat's servers, and go on with its audit log, for its new scope: each seal
        binds the scope it was made for.

        Each entry is opened as the old scope's and put into the new scope's store; an entry
        that fails to open stays as it is, and the owner sees it in ``/mcp_list``.
        """
        if self._sealer is None:
            return
        # With files: one file, read as the old scope's and written as the new one's; the private
        # record and copy (rollback detection) moved along with it and go on describing it. With a
        # database: the old scope's rows are copied, then emptied when every one was moved.
        old = self._storage(session, old_scope)
        new = self._storage(session, session.scope)
        loaded = await old.load()
        for entry in loaded.entries:
            await new.put(entry)
        if isinstance(old, RowServers) and loaded.entries and not loaded.rejected and loaded.warning is None:
            await old.save(())
        if self._audit_key is not None and session.storage is not None:
            # The audit log's rows move too: its chain goes on under the new scope, saying so.
            await move_rows(session.storage.audit, old_scope, session.scope, self._audit_key)
        elif self._audit_key is not None and session.state_dir is not None:
            # The audit log moved too: its chain goes on under the new scope, saying so.
            folder = audit_folder(session.state_dir)
            await anyio.to_thread.run_sync(move_log, folder, old_scope, session.scope, self._audit_key)

    async def on_login_redirect(self, session: ChatSession, sender: Sender, address: str) -> str | None:
        """The owner pasted the address a login ended at: it completes their pending login, once."""
        if self._sealer is None or not sender.is_owner:
            return None
        chat = self.chat(session)
        await chat.reconcile()
        return chat.logins.paste(address, owner=sender.id)

    def credentials(self, session: ChatSession) -> Collection[str]:
        """Every credential the chat's servers hold or held: header values and URL secrets."""
        chat = self._chats.get(session.scope)
        return chat.secrets if chat is not None else frozenset()

    async def on_session_close(self, session: ChatSession) -> None:
        chat = self._chats.get(session.scope)
        if chat is not None and chat.session is session:
            del self._chats[session.scope]
            if (resources := self._resources.pop(session.scope, None)) is not None:
                resources.close()
            await chat.close()


OPENED_ON_THE_LOOP: Final = 16 * 1024
"""A sealed file up to this size (some 30 servers) is read in the open's worker thread and opened
on the event loop; a larger one is opened in the thread too.

Parsing a file and opening its seals is Python work: in the worker thread it waits for the GIL
after every step, behind the event loop, and a storm of chats opening at once spent several
times the work's own CPU on those waits. A large file's seals, opened on the loop, would hold
every other chat up."""


@dataclass(eq=False)
class _FileRead:
    """A chat's sealed file, read in a worker thread in the chat's open (``__call__``)."""

    file: ServerStore
    found: UnopenedFile | LoadResult | None = None
    """What the read found, already opened when the file is large; None until the read ran."""

    def __call__(self) -> None:
        found = self.file.read()
        large = found.data is not None and len(found.data) > OPENED_ON_THE_LOOP
        self.found = self.file.opened(found) if large else found

    def opened(self) -> LoadResult | None:
        """What the read found, its entries opened; None when the read did not run or failed."""
        if isinstance(self.found, UnopenedFile):
            self.found = self.file.opened(self.found)
        return self.found
