"""One chat's remote servers: the file reconciled with a dict of servers, and the owner's actions routed."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..core import ChatSession, Redactor, ToolResult
from ..exceptions import ToolError, UsageError
from ._callback_listener import Callbacks
from ._calls import Calls
from ._flow import FlowGuard, FlowSource
from ._login import Logins
from ._policies import Policies
from ._prompts import ChatPrompts
from ._review import Review
from ._server import ChatContext, RemoteServer, wait_for_connects
from ._settings import RemoteMcpSettings
from ._shared import Asker, ChatSecrets, Revoker
from ._skill_tools import SKILLS_SECTION, ChatSkills
from ._tool import RemoteMcpTool, ToolSlots
from ._views import SECTION_TITLE, section
from .store import (
    AuditKey,
    AuditLog,
    AuditRecord,
    LoadResult,
    OAuthGrant,
    Pins,
    Rejected,
    Saved,
    ServerEntry,
    ServerStorage,
    audit_folder,
    resource_of,
)
from .transport import Connection, Connector, Revocation

__all__ = ["ChatServers"]

Clock = Callable[[], float]


class ChatServers:
    """The remote MCP servers of one chat session, and the one service the owner's commands call.

    It reconciles the file with a dict of ``RemoteServer`` objects, each owning its connection,
    its tool binding, its login and its review; each owner's action (``add``, ``remove``,
    ``restore``) is one call from the file to the connections and the prompt. Its parts work on
    the servers they are handed, and tell it nothing back but what a server's events say
    (``bound``, ``changed``): ``logins`` (OAuth logins), ``review`` (what waits for the owner's
    decision), ``policies`` (the owner's call policies), and the tools' calls.
    """

    def __init__(
        self,
        session: ChatSession,
        store: ServerStorage | None,
        *,
        connector: Connector,
        settings: RemoteMcpSettings,
        task_group: TaskGroup,
        callbacks: Callbacks | None = None,
        clock: Clock = time.time,
        audit_key: AuditKey | None = None,
        opened: LoadResult | None = None,
    ) -> None:
        """``opened``: what ``store`` read in the chat's open, picked up by the first ``reconcile``."""
        self.session = session
        self.store = store
        self._opened = opened
        self.servers: dict[str, RemoteServer] = {}
        self.rejected: tuple[Rejected, ...] = ()
        self.warning: str | None = None
        self._connector = connector
        self._settings = settings
        self._tg = task_group
        callbacks = callbacks if callbacks is not None else Callbacks()
        self._secrets = secrets = ChatSecrets(session)
        folder = audit_folder(session.state_dir) if session.state_dir is not None else None
        self.audit = audit = AuditLog(
            folder,
            session.scope,
            audit_key,
            task_group=task_group,
            redact=secrets.redact_out,
            rows=session.storage.audit if session.storage is not None else None,
        )
        """What was done with the chat's servers and tools, tamper-evident (``/mcp_audit``)."""
        self.flow_guard = FlowGuard(
            session,
            mode=lambda: settings.flow_guard_for(group=session.group),
            redact=secrets.redact_out,
            audit=audit,
        )
        """What each server and workspace file gave the model in the running turn, and whether a
        call carries some of it to another server."""
        self._tools = ToolSlots(session)
        self._revoker = Revoker(session.scope, connector, audit)
        context = ChatContext(
            session=session,
            store=store,
            settings=settings,
            connector=connector,
            callbacks=callbacks,
            task_group=task_group,
            clock=clock,
            secrets=secrets,
            audit=audit,
            tools=self._tools,
            asker=Asker(session, audit),
            revoker=self._revoker,
            events=self,
            servers=self.servers,
        )
        self._context = context
        self.review = Review(context)
        """The servers' new and changed tools and instructions, held until the owner decides."""
        self.prompts = ChatPrompts(context, self.review)
        """The servers' prompts: listed, held until the owner approves them, rendered for a person."""
        self.skills = ChatSkills(context, self.review)
        """The servers' skills: listed, held until the owner approves them, loaded by the agent."""
        self.logins = Logins(context)
        """The owner's OAuth logins (``/mcp_auth``)."""
        self.policies = Policies(context)
        """The owner's call policies (``/mcp_policy``): which calls go ahead, wait for them, or never happen."""
        self._calls = Calls(
            context, policies=self.policies, flows=self.flow_guard, logins=self.logins, review=self.review
        )

    # The file

    async def reconcile(self) -> None:
        """Bring servers in line with the file; costs one ``lstat`` when it did not change."""
        opened, self._opened = self._opened, None
        if self.store is None:
            return
        if await self.store.changed():
            self._apply(await self.store.load())
        elif opened is not None:
            self._apply(opened)

    def _apply(self, result: LoadResult) -> None:
        # Every entry the store verified has a name the binder takes (``server_name_problem``).
        wanted = {entry.name: entry for entry in result.entries}
        self.rejected, self.warning = result.rejected, result.warning
        for name, server in list(self.servers.items()):
            if wanted.get(name) != server.entry and (connection := self._drop(name)) is not None:
                self._tg.start_soon(connection.aclose)
        # Secrets first: a connect error may quote them before this method returns.
        self._remember_secrets(result.entries)
        for name, entry in wanted.items():
            if name not in self.servers:
                server = self.servers[name] = RemoteServer(entry, self._context, self._calls)
                server.start()
            elif (server := self.servers[name]).entry.policy != entry.policy:
                # The owner changed a policy through another process of this host: it applies now
                # (an entry's policy is not compared, so the server stays connected).
                server.policy_changed(entry.policy)

    @property
    def secrets(self) -> frozenset[str]:
        """Every credential of this chat's servers, past and present (the same object until one is added)."""
        return self._secrets.values

    @property
    def redactor(self) -> Redactor:
        """Redacts every credential of this chat's servers, past and present."""
        return self._secrets.redactor

    def _remember_secrets(self, entries: tuple[ServerEntry, ...]) -> None:
        self._secrets.remember(frozenset().union(*(entry.secrets for entry in entries)))

    def _drop(self, name: str) -> Connection | None:
        """Forget a server and unbind its tools; the caller closes the connection returned."""
        return self.servers.pop(name).drop()

    # What the servers tell the chat

    async def bound(self, server: RemoteServer, adopted: Pins | None) -> None:
        """A server bound a tool list: an adopted one is saved, and what waits is shown to the owner."""
        adopted = await self.prompts.connected(server, adopted)
        await self.review.settle(server, adopted)
        await self.skills.connected(server)

    def changed(self) -> None:
        """A server's state changed: the prompt section says it as it is now."""
        self._write_section()

    # Connecting

    async def wait_for_connects(self) -> None:
        """Wait for the connects in flight; each is bounded by the connect timeout."""
        await wait_for_connects(self.servers, self._settings.connect_wait)

    async def before_turn(self) -> None:
        """BeforeAgentStart: reconcile, retry what is due, wait for connects, write the section."""
        await self.reconcile()
        now = self._context.clock()
        for server in self.servers.values():
            due = server.next_retry is not None and server.next_retry <= now
            if server.status == "unavailable" and not server.connecting and due:
                server.start()
        await self.wait_for_connects()
        self._write_section()
        if (rendered := self.prompts.take_rendered()) is not None:
            # The turn a person's /prompt starts: its text is the server's, for the flow guard too.
            self.flow_guard.saw(FlowSource.of_server(rendered[0]), rendered[1])

    async def _pick_up(self, saved: Saved, *, superseded: OAuthGrant | None = None) -> RemoteServer:
        """After ``add`` saved an entry: pick it up from what was written, and wait for its connect.

        ``superseded``: the OAuth grant of the entry it replaced, revoked once a new one is stored.
        """
        entry = saved.entry
        assert entry is not None
        self._remember_secrets((entry,))
        # A re-add connects afresh even when the entry did not change: it is how the owner
        # retries a server in backoff, or picks up a changed tool list.
        if entry.name in self.servers and (connection := self._drop(entry.name)) is not None:
            self._tg.start_soon(connection.aclose)
        if saved.follows is not None and self.store is not None:
            # The write changed nothing but this entry in the file as last read: no read back.
            self.store.taken(saved)
            started = self.servers[entry.name] = RemoteServer(entry, self._context, self._calls)
            started.start()
        elif self.store is not None:
            # Something else changed too (another writer, a file set aside): the file as a whole.
            self._apply(await self.store.load())
        server = self.servers.get(entry.name)
        if server is None:
            raise ToolError(f"{entry.name} was saved but cannot be read back; see /mcp_list")
        server.review.adopt_quietly()  # the reply lists the tools the add pins
        server.login.supersede(superseded)  # before its connect runs: set before the first await
        await server.wait()
        self._write_section()
        return server

    # The owner's actions: one call each, from the file to the connections and the prompt

    def url_refusal(self, url: str) -> str | None:
        """Why this host will not connect to ``url`` (its egress policy), or None when it will."""
        return self._connector.settings.egress.url_refusal(url)

    async def add(self, entry: ServerEntry) -> tuple[Saved, RemoteServer]:
        """Save ``entry`` (a new server, or one that replaces its namesake) and wait for its connect.

        Raises ``StoreError`` when the file cannot take it; nothing changed then.
        """
        previous = self.servers.get(entry.name)
        superseded = self.logins.held_grant(entry.name)
        if superseded is None or not superseded.authorized:
            superseded = previous.login.superseded if previous is not None else None
        saved = await self._file().put(entry)
        self.audit.record(
            "server_replaced" if saved.changed else "server_added",
            server=entry.name,
            url=entry.shown_url,
            transport=entry.transport,
            auth=entry.auth_kind,
        )
        return saved, await self._pick_up(saved, superseded=superseded)

    async def add_for_login(self, entry: ServerEntry) -> tuple[Saved, RemoteServer]:
        """Save ``entry`` as an ``oauth`` entry without a grant yet, and pick it up: a login comes next."""
        return await self.add(replace(entry, auth_kind="oauth", oauth=OAuthGrant(resource_of(entry.url))))

    async def remove(self, name: str) -> tuple[Saved, int | None, Revocation]:
        """Remove ``name`` from the file and drop it; also the tool count it had (None: never picked up)
        and how revoking its OAuth tokens (RFC 7009) went, which comes after the removal and never
        holds it up.

        Raises ``StoreError`` when the file cannot be written; nothing changed then.
        """
        server = self.servers.get(name)
        tools = len(server.tools) if server is not None else None
        grant = self.logins.held_grant(name)
        saved = await self._file().remove(name)
        await self.reconcile()
        self._write_section()
        revoked = Revocation("nothing")
        if saved.changed and grant is not None:
            revoked = await self._revoker.revoke(grant)
        if saved.changed and server is not None and server.login.superseded is not None:
            # The grant of an entry this one replaced, whose new login never came.
            await self._revoker.replaced(name, [server.login.superseded])
        if saved.changed:
            self.audit.record("server_removed", server=name, revoked=revoked.outcome)
        return saved, tools, revoked

    async def reconnect(self, name: str) -> RemoteServer:
        """Connect ``name`` afresh, now (the owner's retry of a server in backoff, or a stale one), and
        wait for the connect; one already in flight is waited for instead. The file is not touched."""
        server = self.servers[name]
        if not server.connecting:
            if (connection := server.take_connection()) is not None:
                self._tg.start_soon(connection.aclose)
            server.start()
            self.audit.record("server_reconnected", server=name)
        await server.wait()
        self._write_section()
        return server

    async def restore(self) -> Saved:
        """Put back the copy of the file Playa saved last (``/mcp_restore``), and pick it up.

        Raises ``StoreError`` when there is none to trust; nothing changed then.
        """
        saved = await self._file().restore()
        self.audit.record("servers_restored", changed=saved.changed)
        await self.reconcile()
        self._write_section()
        return saved

    async def audit_records(self, count: int) -> list[tuple[AuditRecord, bool]] | None:
        """The latest ``count`` records of the chat's audit log (``/mcp_audit``), oldest first, each
        with whether it verifies; None when the chat keeps none (no private folder)."""
        return await self.audit.latest(count) if self.audit.enabled else None

    def _file(self) -> ServerStorage:
        if self.store is None:
            raise UsageError("Remote MCP is disabled: this host has no secret to seal servers with.")
        return self.store

    # Tools

    def withheld(self, server: RemoteServer) -> list[tuple[str, str]]:
        """The server's tools that the model in use cannot take, with the reason for each."""
        return self._tools.withheld(server.tools)

    def tool(self, exposed: str) -> RemoteMcpTool | None:
        return self._tools.get(exposed)

    def saw_result(self, name: str, arguments: Mapping[str, Any], result: ToolResult) -> None:
        """The model is about to see ``result`` of the tool ``name``: a source for the flow guard
        when a server of this chat's, or the workspace (a host tool: a file read), gave it."""
        tool = self._tools.get(name)
        if tool is not None and tool.binding is not None:
            source = FlowSource.of_server(tool.binding.server)
        elif (server := self.skills.source(name, arguments)) is not None:
            source = FlowSource.of_server(server)  # a skill's text is its server's
        elif name in self.session.core_tools:
            path = arguments.get("path")
            source = FlowSource.of_file(path if isinstance(path, str) else ".")
        else:
            return
        self.flow_guard.saw(source, result.text)

    def _write_section(self) -> None:
        self.session.prompt.set(SECTION_TITLE, section(self))
        self.session.prompt.set(SKILLS_SECTION, self.skills.section())
        self.skills.offer()

    async def close(self) -> None:
        """Close every connection at once; each close is bounded by the close timeout."""
        connections = [connection for name in list(self.servers) if (connection := self._drop(name))]
        try:
            if len(connections) == 1:
                await connections[0].aclose()
            elif connections:
                async with anyio.create_task_group() as tg:
                    for connection in connections:
                        tg.start_soon(connection.aclose)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._settings.connection.close_timeout):
                await self.audit.flush()
            # Nothing of this chat's is left to log its credentials.
            self._secrets.release()
