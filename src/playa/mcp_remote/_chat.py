"""One chat's remote servers: the file reconciled, connections kept, tools bound, secrets redacted."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import mcp_types
from anyio.abc import TaskGroup

from ..core import (
    QUESTION_TIMEOUT,
    UI,
    Answer,
    Approval,
    ChatSession,
    Question,
    Redactor,
    ToolResult,
    outbound_secrets,
)
from ..exceptions import AccessRefused, NeedsLogin, RemoteError, ToolError, UsageError
from ..mcp import exposed_names, normalize_schema
from ._approvals import Approvals
from ._calls import Calls
from ._flow import FlowGuard, FlowSource
from ._login import Logins, login_hint
from ._policies import Policies
from ._server import LoginStart, RemoteServer
from ._settings import RemoteMcpSettings
from ._tool import Binding, RemoteMcpTool
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
    ServerStore,
    audit_folder,
    resource_of,
    without_format,
)
from .transport import Callbacks, Connection, Connector, Endpoint, Revocation, ServerAuth

__all__ = ["ChatServers"]

logger = logging.getLogger(__name__)

Clock = Callable[[], float]


class ChatServers:
    """The remote MCP servers of one chat session, and the one service the owner's commands call.

    Each owner's action (``add``, ``remove``, ``restore``) is one call that takes it from the
    file to the connections and the prompt. It reconciles the file, connects, binds tools and
    closes; its parts are handed what they use: ``logins`` (OAuth logins and grants),
    ``approvals`` (changed tools and instructions, held for the owner) and the tools' calls.
    What is shown of the servers is written in ``_views``.
    """

    def __init__(
        self,
        session: ChatSession,
        store: ServerStore | None,
        *,
        connector: Connector,
        settings: RemoteMcpSettings,
        task_group: TaskGroup,
        callbacks: Callbacks | None = None,
        clock: Clock = time.time,
        audit_key: AuditKey | None = None,
    ) -> None:
        self.session = session
        self.store = store
        self.servers: dict[str, RemoteServer] = {}
        self.rejected: tuple[Rejected, ...] = ()
        self.warning: str | None = None
        self.redactor = Redactor.EMPTY
        self._connector = connector
        self._settings = settings
        self._tg = task_group
        self._callbacks = callbacks if callbacks is not None else Callbacks()
        self._clock = clock
        self._tools: dict[str, RemoteMcpTool] = {}
        self._secrets: frozenset[str] = frozenset()
        self._asking = anyio.Lock()
        """One question at a time: the person answers them in turn."""
        folder = audit_folder(session.state_dir) if session.state_dir is not None else None
        self.audit = AuditLog(
            folder, session.scope, audit_key, task_group=task_group, redact=self._redact_out
        )
        """What was done with the chat's servers and tools, tamper-evident (``/mcp_audit``)."""
        self.flow_guard = FlowGuard(
            session,
            mode=lambda: settings.flow_guard_for(group=session.group),
            redact=self._redact_out,
            audit=self.audit,
        )
        """What each server and workspace file gave the model in the running turn, and whether a
        call carries some of it to another server."""
        self.logins = Logins(
            session,
            self.servers,
            store,
            connector=connector,
            callbacks=self._callbacks,
            settings=settings,
            task_group=task_group,
            clock=clock,
            redact=self._redact,
            remember=self._remember,
            reconnect=self._reconnect,
            audit=self.audit,
        )
        """The owner's OAuth logins (``/mcp_auth``) and each ``oauth`` server's grant."""
        self.approvals = Approvals(
            session,
            self.servers,
            store,
            interval=settings.approval_interval,
            clock=clock,
            redact=self._redact,
            bind=self._bind,
            wait_for_connects=self.wait_for_connects,
            write_section=self._write_section,
            audit=self.audit,
        )
        """The servers' new and changed tools and instructions, held until the owner decides."""
        self.policies = Policies(
            session,
            self.servers,
            store,
            default=settings.default_policy,
            ask_timeout=settings.ask_timeout,
            ask=self._asked,
            redact=self._redact_out,
            rebind=self._rebind,
            audit=self.audit,
        )
        """The owner's call policies (``/mcp_policy``): which calls go ahead, wait for them, or never happen."""
        self._calls = Calls(
            session,
            self.servers,
            settings=settings.connection,
            task_group=task_group,
            redact=self._redact,
            connect=self._connect,
            needs_login=partial(self._failed, needs_login=True),
            step_up=self._step_up,
            write_section=self._write_section,
            audit=self.audit,
            flows=self.flow_guard,
            policies=self.policies,
        )

    # The file

    async def reconcile(self) -> None:
        """Bring servers in line with the file; costs one ``lstat`` when it did not change."""
        if self.store is None or not self.store.changed():
            return
        # The load reads, verifies and may wait on another process's lock: off the event loop.
        self._apply(await anyio.to_thread.run_sync(self.store.load))

    def _apply(self, result: LoadResult) -> None:
        # Every entry the store verified has a name the binder takes (``server_name_problem``).
        wanted = {entry.name: entry for entry in result.entries}
        self.rejected, self.warning = result.rejected, result.warning
        for name, state in list(self.servers.items()):
            if wanted.get(name) != state.entry and (connection := self._drop(name)) is not None:
                self._tg.start_soon(connection.aclose)
        # Secrets first: a connect error may quote them before this method returns.
        self._remember_secrets(result.entries)
        for name, entry in wanted.items():
            if name not in self.servers:
                state = self.servers[name] = RemoteServer(entry)
                self._start(state)
            elif (state := self.servers[name]).entry.policy != entry.policy:
                # The owner changed a policy through another process of this host: it applies now
                # (an entry's policy is not compared, so the server stays connected).
                state.entry = replace(state.entry, policy=entry.policy)
                self._rebind(state)

    @property
    def secrets(self) -> frozenset[str]:
        """Every credential of this chat's servers, past and present (the same object until one is added)."""
        return self._secrets

    def _remember_secrets(self, entries: tuple[ServerEntry, ...]) -> None:
        self._remember(frozenset().union(*(entry.secrets for entry in entries)))

    def _remember(self, values: frozenset[str]) -> None:
        # A removed server's values stay: they may still sit in an old result or error.
        secrets = self._secrets | values
        if secrets != self._secrets:
            self._secrets = frozenset(secrets)
            self.redactor = Redactor(self._secrets)
            # Before anything can log them: a connect error may quote them at once.
            outbound_secrets().hold(self, self._secrets)

    def _redact(self, text: str) -> str:
        return self.redactor.redact(text)

    def _redact_out(self, text: str) -> str:
        """Text this extension keeps or shows: its own credentials and the host's removed."""
        text = self.redactor.redact(text)
        return self.session.redact(text) if self.session.redact is not None else text

    async def _ask(self, question: Question) -> Answer:
        """A server's question, asked (``_asked``) and recorded with how it was answered, never the values."""
        answer = await self._asked(question)
        sender = self.session.turn_sender
        self.audit.record(
            "question",
            server=question.asker,
            sender=sender.id if sender is not None else None,
            fields=len(question.fields),
            link=question.url is not None,
            answer=answer.action,
        )
        return answer

    async def _asked(self, question: Question, timeout: float = QUESTION_TIMEOUT) -> Answer:
        """A server's question, to the person whose message started the running turn (a
        ``permission`` question: to the owner, through that turn's front end).

        Outside a turn nobody is waiting for the server, and nobody may be asked on the chat's
        behalf: the question is cancelled at once. Unanswered in time, it is cancelled too.
        """
        ui = self.session.turn_ui
        if ui is None:
            logger.info(
                "%s: a question from %s outside a turn was cancelled", self.session.scope, question.asker
            )
            return Answer("cancel")
        with anyio.move_on_after(timeout):
            async with self._asking:
                return await ui.question(question, timeout=timeout)
        return Answer("cancel")

    def _drop(self, name: str) -> Connection | None:
        """Forget a server and unbind its tools; the caller closes the connection returned."""
        state = self.servers.pop(name)
        for exposed in state.tools:
            self._tools[exposed].unbind()
            self.session.tools.deactivate(exposed)
        state.tools = []
        connection, state.connection = state.connection, None
        return connection

    # Connecting

    def _start(self, state: RemoteServer, *, after_login: bool = False) -> None:
        state.status = "connecting"
        state.attempt = anyio.Event()
        self._tg.start_soon(partial(self._connect, state, after_login=after_login))

    def _endpoint(self, state: RemoteServer) -> Endpoint:
        entry = state.entry
        auth = None
        if entry.auth_kind == "oauth":
            redirect = self._callbacks.redirect_uri_or_placeholder
            auth = ServerAuth(
                entry.url,
                self.logins.grant(state),
                redirect_uri=redirect,
                clock=self._clock,
                on_refresh_failed=partial(self._refresh_failed, entry.name),
            )
        grant = entry.oauth.secrets if entry.oauth is not None else frozenset()
        return Endpoint(
            server=entry.name,
            url=entry.url,
            transport=entry.transport,
            headers=entry.headers,
            url_secrets=entry.secrets - set(entry.headers.values()) - grant,
            auth=auth,
        )

    def _refresh_failed(self, name: str, status: int) -> None:
        """The authorization server refused to refresh ``name``'s tokens: the owner's login must help."""
        self.audit.record("refresh_failed", server=name, status=status)

    async def _connect(self, state: RemoteServer, *, after_login: bool = False) -> None:
        """Connect ``state``'s server; ``after_login``: the first connect with the owner's new login."""
        attempt = state.attempt
        name = state.entry.name
        connection: Connection | None = None
        endpoint: Endpoint | None = None
        # The boundary covers every step, binding included: this runs in the task group every
        # chat of the host shares, and an exception escaping it would end them all.
        try:
            if state.entry.auth_kind == "oauth" and not self.logins.grant(state).grant.authorized:
                # No tokens yet: only the owner's login can help, and a connect would only
                # register clients with the authorization server for nothing.
                raise NeedsLogin("this server needs a login", server=name)
            endpoint = self._endpoint(state)
            connection = await self._connector.connect(
                endpoint,
                self._tg,
                ask=self._ask,
                redact=self._redact,
                on_tools=partial(self._tools_changed, state),
                tools_cache=state.tools_cache,
            )
            if self.servers.get(name) is not state:
                # Removed or replaced while connecting.
                await connection.aclose()
                return
            adopted = self.approvals.hold_instructions(
                state, connection.instructions, self._bind(state, connection)
            )
            state.connection, state.status, state.reason = connection, "connected", None
            state.detail = None
            state.transport, state.protocol = connection.transport, connection.protocol
            state.failures, state.next_retry, state.needs_login = 0, None, False
            state.refused_logins = 0
            if state.superseded is not None and state.entry.auth_kind != "oauth":
                # It replaced an OAuth entry and needs no login: the old tokens are abandoned.
                self._tg.start_soon(self.logins.revoke_abandoned, name, state.superseded)
                state.superseded = None
            await self.approvals.settle(state, adopted)
        except RemoteError as exc:
            if self.servers.get(name) is state:
                if endpoint is not None and endpoint.auth is not None and endpoint.auth.scope:
                    state.scope = endpoint.auth.scope
                refused = isinstance(exc, AccessRefused)
                if refused and after_login:
                    state.refused_logins += 1
                self._failed(
                    state,
                    exc.reason,
                    needs_login=isinstance(exc, NeedsLogin),
                    refused=refused,
                    detail=exc.detail,
                )
        except Exception as exc:  # boundary: one server's bug must not end the chat's task group
            logger.error("connecting %s in %s failed: %s", name, self.session.scope, type(exc).__name__)
            if connection is not None:
                self._tg.start_soon(connection.aclose)
            if self.servers.get(name) is state:
                self._failed(state, f"internal error ({type(exc).__name__})")
        finally:
            if attempt is not None:
                attempt.set()

    def _failed(
        self,
        state: RemoteServer,
        reason: str,
        *,
        needs_login: bool = False,
        refused: bool = False,
        detail: str | None = None,
    ) -> None:
        """``refused``: the server refused a login's token for the scopes it granted (``AccessRefused``).

        ``reason`` is Playa's words, for the prompt too; ``detail`` what the server said, for the owner only.
        """
        # Its tools stay bound but hidden until a connect succeeds and binds them again.
        for exposed in state.tools:
            self.session.tools.deactivate(exposed)
        state.failures += 1
        state.status = "unavailable"
        state.needs_login = needs_login
        if refused and state.refused_logins >= 2:
            # A login in answer to the refusal did not help: suggesting another would be a loop.
            reason += ", and again after a new login: the account needs access at the server itself"
        elif refused:
            # The account's access may have changed since the token was issued: one new login may help.
            reason = f"{login_hint(reason, state.entry.name)} to log in again"
        elif needs_login:
            # A timer cannot log in: the server waits for the owner.
            reason = login_hint(reason, state.entry.name)
        state.reason = self.redactor.redact(reason)
        state.detail = self.redactor.redact(detail) if detail is not None else None
        state.next_retry = None if needs_login else self._clock() + self._settings.backoff(state.failures)
        logger.info("%s in %s is unavailable: %s", state.entry.name, self.session.scope, state.reason)

    async def wait_for_connects(self) -> None:
        """Wait for the connects in flight; each is bounded by the connect timeout."""
        with anyio.move_on_after(self._settings.connect_wait):
            for state in list(self.servers.values()):
                if state.attempt is not None:
                    await state.attempt.wait()

    async def before_turn(self) -> None:
        """BeforeAgentStart: reconcile, retry what is due, wait for connects, write the section."""
        await self.reconcile()
        now = self._clock()
        for state in self.servers.values():
            due = state.next_retry is not None and state.next_retry <= now
            if state.status == "unavailable" and not state.connecting and due:
                self._start(state)
        await self.wait_for_connects()
        self._write_section()

    async def _pick_up(self, entry: ServerEntry, *, superseded: OAuthGrant | None = None) -> RemoteServer:
        """After ``add`` saved ``entry``: pick it up and wait for its connect.

        ``superseded``: the OAuth grant of the entry it replaced, revoked once a new one is stored.
        """
        self._remember_secrets((entry,))
        # A re-add connects afresh even when the entry did not change: it is how the owner
        # retries a server in backoff, or picks up a changed tool list.
        if entry.name in self.servers and (connection := self._drop(entry.name)) is not None:
            self._tg.start_soon(connection.aclose)
        if self.store is not None:
            self._apply(await anyio.to_thread.run_sync(self.store.load))
        state = self.servers.get(entry.name)
        if state is None:
            raise ToolError(f"{entry.name} was saved but cannot be read back; see /mcp_list")
        state.quiet_adopt = True  # the reply lists the tools the add pins
        state.superseded = superseded  # before its connect runs: set before the first await
        await self._connected(state)
        return state

    async def _reconnect(self, state: RemoteServer) -> None:
        """Connect ``state``'s server with the owner's new login, and wait for the connect."""
        self._start(state, after_login=True)
        await self._connected(state)

    async def _connected(self, state: RemoteServer) -> None:
        """Wait for ``state``'s connect in flight (bounded), then write the section as it left things."""
        if state.attempt is not None:
            with anyio.move_on_after(self._settings.connect_wait):
                await state.attempt.wait()
        self._write_section()

    async def _file_changed(self) -> None:
        """After ``remove`` or ``restore`` changed the file."""
        await self.reconcile()
        self._write_section()

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
            superseded = previous.superseded if previous is not None else None
        saved = await anyio.to_thread.run_sync(self._file().put, entry)
        self.audit.record(
            "server_replaced" if saved.changed else "server_added",
            server=entry.name,
            url=entry.shown_url,
            transport=entry.transport,
            auth=entry.auth_kind,
        )
        return saved, await self._pick_up(entry, superseded=superseded)

    async def add_for_login(self, entry: ServerEntry) -> tuple[Saved, RemoteServer]:
        """Save ``entry`` as an ``oauth`` entry without a grant yet, and pick it up: a login comes next."""
        return await self.add(replace(entry, auth_kind="oauth", oauth=OAuthGrant(resource_of(entry.url))))

    async def remove(self, name: str) -> tuple[Saved, int | None, Revocation]:
        """Remove ``name`` from the file and drop it; also the tool count it had (None: never picked up)
        and how revoking its OAuth tokens (RFC 7009) went, which comes after the removal and never
        holds it up.

        Raises ``StoreError`` when the file cannot be written; nothing changed then.
        """
        state = self.servers.get(name)
        tools = len(state.tools) if state is not None else None
        grant = self.logins.held_grant(name)
        saved = await anyio.to_thread.run_sync(self._file().remove, name)
        await self._file_changed()
        revoked = Revocation("nothing")
        if saved.changed and grant is not None:
            revoked = await self.logins.revoke(grant)
        if saved.changed and state is not None and state.superseded is not None:
            # The grant of an entry this one replaced, whose new login never came.
            await self.logins.revoke_superseded(name, [state.superseded])
        if saved.changed:
            self.audit.record("server_removed", server=name, revoked=revoked.outcome)
        return saved, tools, revoked

    async def restore(self) -> Saved:
        """Put back the copy of the file Playa saved last (``/mcp_restore``), and pick it up.

        Raises ``StoreError`` when there is none to trust; nothing changed then.
        """
        saved = await anyio.to_thread.run_sync(self._file().restore)
        self.audit.record("servers_restored", changed=saved.changed)
        await self._file_changed()
        return saved

    # The owner's logins and decisions: what the commands call, never the parts behind them.

    async def start_login(
        self,
        name: str,
        *,
        owner: str,
        send_link: Callable[[str], Awaitable[object]],
        report: Callable[[str], Awaitable[object]],
    ) -> LoginStart:
        """Begin the owner's login to ``name`` (``/mcp_auth``); see ``Logins.start``."""
        return await self.logins.start(name, owner=owner, send_link=send_link, report=report)

    async def _step_up(self, state: RemoteServer) -> bool:
        """A call needs a scope the login lacks: the owner is sent a link for it (``Logins.step_up``).

        Sent where the owner's latest command came from, privately; with none known yet (after
        a restart), nobody is asked and the chat says what the owner can run.
        """
        ui = self.approvals.owner_ui
        if ui is None:
            return False
        return await self.logins.step_up(
            state, owner=self.session.owner, send_link=ui.send_private, report=ui.send
        )

    @property
    def login_timeout(self) -> float:
        """Seconds an authorization link stays usable."""
        return self.logins.timeout

    @property
    def login_redirect_uri(self) -> str | None:
        """Where a login ends (the address the owner may paste back); None before any began."""
        return self.logins.redirect_uri

    def complete_login(self, address: str, *, owner: str) -> str | None:
        """Complete a login with the address the owner pasted; what to tell them (see ``Logins.paste``)."""
        return self.logins.paste(address, owner=owner)

    async def owner_seen(self, ui: UI, *, announce: bool = True) -> None:
        """The owner ran a command through ``ui``: what waited for them is shown (``announce``) and remembered."""
        await self.approvals.owner_seen(ui, announce=announce)

    async def review(self, state: RemoteServer) -> Approval | str | None:
        """What of ``state``'s server waits for the owner's decision, now counted as shown; None when nothing does.

        A text instead when it was too large to show whole (it was rejected, and the text says why).
        """
        return await self.approvals.review(state)

    async def decide(self, name: str, *, approve: bool, digest: str | None = None) -> str:
        """The owner's ``/mcp_approve`` or ``/mcp_reject`` of what they were shown; what to tell them."""
        return await self.approvals.decide(name, approve=approve, digest=digest)

    async def audit_records(self, count: int) -> list[tuple[AuditRecord, bool]] | None:
        """The latest ``count`` records of the chat's audit log (``/mcp_audit``), oldest first, each
        with whether it verifies; None when the chat keeps none (no private folder)."""
        return await self.audit.latest(count) if self.audit.enabled else None

    def _file(self) -> ServerStore:
        if self.store is None:
            raise UsageError("Remote MCP is disabled: this host has no secret to seal servers with.")
        return self.store

    # Tools

    def _bind(self, state: RemoteServer, connection: Connection) -> Pins | None:
        """Bind the server's live tools; hold back new and changed ones; unbind the rest at once.

        Returns the pins to save when the entry had none: the list it adopts as approved.
        """
        entry = state.entry
        allowed: dict[str, mcp_types.Tool] = {}
        state.withheld = []
        for tool in connection.tools:
            if (entry.tools is None or tool.name in entry.tools) and tool.name not in allowed:
                if self.redactor.contains(without_format(tool.model_dump_json(by_alias=True))):
                    # Its name, title, description or schema quotes a credential: the model must
                    # not see it, and redacting a definition would change what the tool means.
                    state.withheld.append(f"{self._shown(tool.name)!r}: its definition holds a credential")
                    continue
                if (why := connection.unrunnable(tool)) is not None:
                    # Offered, it could only fail: the model would call it for nothing.
                    state.withheld.append(f"{self._shown(tool.name)!r}: {why}")
                    continue
                allowed[tool.name] = tool
        # A server offering hundreds of tools would drown the model (and slow every step); the
        # owner picks the ones they want with --tools.
        limit = self._settings.max_tools_per_server
        state.hidden = max(0, len(allowed) - limit)
        allowed = dict(list(allowed.items())[:limit])
        allowed, adopted = self.approvals.hold_tools(state, allowed)
        for remote in [remote for remote in allowed if self.policies.of(state, remote) == "deny"]:
            # The owner's policy: the model is never offered it (a call all the same is refused).
            del allowed[remote]
            state.withheld.append(f"{self._shown(remote)!r}: your policy denies it")
        names = exposed_names(entry.name, allowed)
        # Every binding is made before the registry changes: a step that raises leaves the
        # chat's tools as they were.
        bindings: list[Binding] = []
        for remote, tool in allowed.items():
            # Not cut here: the model-bound gate cuts descriptions once they are redacted.
            description = (tool.description or tool.title or "").strip()
            bindings.append(
                Binding(
                    server=entry.name,
                    remote_name=remote,
                    description=f"[{entry.name}] {description}".strip(),
                    parameters=normalize_schema(tool.input_schema),
                    call=partial(self._calls.call, state, names[remote]),
                )
            )
        bound: list[str] = []
        for binding in bindings:
            exposed = names[binding.remote_name]
            registry_tool = self._tools.get(exposed)
            if registry_tool is None:
                registry_tool = self._tools[exposed] = RemoteMcpTool(exposed)
                self.session.tools.register(registry_tool, active=False)
            registry_tool.bind(binding)
            self.session.tools.activate(exposed)
            bound.append(exposed)
        for exposed in set(state.tools) - set(bound):
            self._tools[exposed].unbind()
            self.session.tools.deactivate(exposed)
        state.tools = bound
        return adopted

    def _rebind(self, state: RemoteServer) -> None:
        """Bind the server's tools again after a policy changed: a denied one leaves the model's list."""
        connection = state.connection
        if (
            connection is not None
            and not connection.broken
            and (adopted := self._bind(state, connection)) is not None
        ):
            self._tg.start_soon(self.approvals.settle, state, adopted)
        self._write_section()

    async def _tools_changed(self, state: RemoteServer, connection: Connection) -> None:
        """The server said its tool list changed, and the connection listed it again."""
        if self.servers.get(state.entry.name) is not state or state.connection is not connection:
            return  # dropped or replaced meanwhile; a new connection lists its own tools
        adopted = self._bind(state, connection)
        await self.approvals.settle(state, adopted)
        self._write_section()

    def _shown(self, name: str) -> str:
        """A server's tool name fit to show: redacted, then cut."""
        shown = self.redactor.redact(name)
        return shown if len(shown) <= 40 else shown[:39] + "…"

    def withheld(self, state: RemoteServer) -> list[tuple[str, str]]:
        """The server's tools that the model in use cannot take, with the reason for each."""
        found: list[tuple[str, str]] = []
        for exposed in state.tools:
            reason = self.session.tool_rules.withheld(self._tools[exposed])
            if reason is not None:
                found.append((exposed, reason))
        return found

    def tool(self, exposed: str) -> RemoteMcpTool | None:
        return self._tools.get(exposed)

    def saw_result(self, name: str, arguments: Mapping[str, Any], result: ToolResult) -> None:
        """The model is about to see ``result`` of the tool ``name``: a source for the flow guard
        when a server of this chat's, or the workspace (a host tool: a file read), gave it."""
        tool = self._tools.get(name)
        if tool is not None and tool.binding is not None:
            source = FlowSource.of_server(tool.binding.server)
        elif name in self.session.core_tools:
            path = arguments.get("path")
            source = FlowSource.of_file(path if isinstance(path, str) else ".")
        else:
            return
        self.flow_guard.saw(source, result.text)

    def _write_section(self) -> None:
        self.session.prompt.set(SECTION_TITLE, section(self))

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
            outbound_secrets().release(self)
