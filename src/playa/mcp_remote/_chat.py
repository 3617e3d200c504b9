"""One chat's remote servers: the file reconciled, connections kept, tools bound, secrets redacted."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

import anyio
import anyio.to_thread
import mcp_types
from anyio.abc import TaskGroup

from ..exceptions import CallFailed, RemoteError, RemoteTimeout, ToolError
from ..host import QUESTION_TIMEOUT, Answer, ChatSession, Question, Redactor, ToolResult, outbound_secrets
from ..mcp import exposed_names, map_result, normalize_schema, server_name_problem
from ._connection import Connection, Connector, Endpoint
from ._settings import RemoteMcpSettings
from ._store import LoadResult, Rejected, ServerEntry, ServerStore
from ._tool import Binding, RemoteMcpTool

__all__ = ["CONNECT_WAIT_MARGIN", "SECTION_TITLE", "ChatServers", "ServerState"]

logger = logging.getLogger(__name__)

SECTION_TITLE = "Remote MCP servers"
CONNECT_WAIT_MARGIN = 1.0
"""Seconds a turn waits for connects in flight beyond the connect timeout that bounds each."""
_SECTION_TOOLS = 30  # tool names listed per server in the prompt section; the model sees all of them as tools

Clock = Callable[[], float]


@dataclass(eq=False)
class ServerState:
    """What the chat knows of one server now."""

    entry: ServerEntry
    status: Literal["connecting", "connected", "unavailable"] = "connecting"
    connection: Connection | None = None
    reason: str | None = None
    """Why it is unavailable, or why its last call dropped the connection (redacted)."""
    failures: int = 0
    next_retry: float | None = None
    attempt: anyio.Event | None = None
    """Set when the connect attempt in flight ends; None when none is in flight."""
    tools: list[str] = field(default_factory=list)
    """The exposed names of the tools bound to this server."""
    hidden: int = 0
    """How many more tools the server offers beyond the per-server limit."""
    withheld: list[str] = field(default_factory=list)
    """Tools never offered to the model, each with why (safe to show: redacted and cut)."""
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    @property
    def connecting(self) -> bool:
        return self.attempt is not None and not self.attempt.is_set()


class ChatServers:
    """The remote MCP servers of one chat session."""

    def __init__(
        self,
        session: ChatSession,
        store: ServerStore | None,
        *,
        connector: Connector,
        settings: RemoteMcpSettings,
        task_group: TaskGroup,
        clock: Clock = time.time,
    ) -> None:
        self.session = session
        self.store = store
        self.servers: dict[str, ServerState] = {}
        self.rejected: tuple[Rejected, ...] = ()
        self.warning: str | None = None
        self.redactor = Redactor.EMPTY
        self._connector = connector
        self._settings = settings
        self._tg = task_group
        self._clock = clock
        self._tools: dict[str, RemoteMcpTool] = {}
        self._secrets: frozenset[str] = frozenset()
        self._asking = anyio.Lock()
        """One question at a time: the person answers them in turn."""

    # The file

    async def reconcile(self) -> None:
        """Bring servers in line with the file; costs one ``lstat`` when it did not change."""
        if self.store is None or not self.store.changed():
            return
        # The load reads, verifies and may wait on another process's lock: off the event loop.
        self._apply(await anyio.to_thread.run_sync(self.store.load))

    def _apply(self, result: LoadResult) -> None:
        rejected = list(result.rejected)
        wanted: dict[str, ServerEntry] = {}
        for index, entry in enumerate(result.entries):
            # A sealed entry can still carry a name the binder refuses (the reserved "mcp"
            # through ``ServerStore.put``): it is shown as ignored, never connected.
            if (problem := server_name_problem(entry.name)) is not None:
                rejected.append(Rejected(index=index, name=entry.name, reason=problem))
            else:
                wanted[entry.name] = entry
        self.rejected, self.warning = tuple(rejected), result.warning
        for name, state in list(self.servers.items()):
            if wanted.get(name) != state.entry and (connection := self._drop(name)) is not None:
                self._tg.start_soon(connection.aclose)
        # Secrets first: a connect error may quote them before this method returns.
        self._remember_secrets(result.entries)
        for name, entry in wanted.items():
            if name not in self.servers:
                state = self.servers[name] = ServerState(entry)
                self._start(state)

    @property
    def secrets(self) -> frozenset[str]:
        """Every credential of this chat's servers, past and present (the same object until one is added)."""
        return self._secrets

    def _remember_secrets(self, entries: tuple[ServerEntry, ...]) -> None:
        # A removed server's values stay: they may still sit in an old result or error.
        secrets = self._secrets.union(*(entry.secrets for entry in entries))
        if secrets != self._secrets:
            self._secrets = frozenset(secrets)
            self.redactor = Redactor(self._secrets)
            # Before anything can log them: a connect error may quote them at once.
            outbound_secrets().add(self._secrets)

    def _redact(self, text: str) -> str:
        return self.redactor.redact(text)

    async def _ask(self, question: Question) -> Answer:
        """A server's question, to the person whose message started the running turn.

        Outside a turn nobody is waiting for the server, and nobody may be asked on the chat's
        behalf: the question is cancelled at once. Unanswered in time, it is cancelled too.
        """
        ui = self.session.turn_ui
        if ui is None:
            logger.info(
                "%s: a question from %s outside a turn was cancelled", self.session.scope, question.asker
            )
            return Answer("cancel")
        with anyio.move_on_after(QUESTION_TIMEOUT):
            async with self._asking:
                return await ui.question(question, timeout=QUESTION_TIMEOUT)
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

    def _start(self, state: ServerState) -> None:
        state.status = "connecting"
        state.attempt = anyio.Event()
        self._tg.start_soon(self._connect, state)

    async def _connect(self, state: ServerState) -> None:
        attempt = state.attempt
        name = state.entry.name
        connection: Connection | None = None
        # The boundary covers every step, binding included: this runs in the task group every
        # chat of the host shares, and an exception escaping it would end them all.
        try:
            connection = await self._connector.connect(
                _endpoint(state.entry), self._tg, ask=self._ask, redact=self._redact
            )
            if self.servers.get(name) is not state:
                # Removed or replaced while connecting.
                await connection.aclose()
                return
            self._bind(state, connection)
            state.connection, state.status, state.reason = connection, "connected", None
            state.failures, state.next_retry = 0, None
        except RemoteError as exc:
            if self.servers.get(name) is state:
                self._failed(state, exc.reason)
        except Exception as exc:  # boundary: one server's bug must not end the chat's task group
            logger.error("connecting %s in %s failed: %s", name, self.session.scope, type(exc).__name__)
            if connection is not None:
                self._tg.start_soon(connection.aclose)
            if self.servers.get(name) is state:
                self._failed(state, f"internal error ({type(exc).__name__})")
        finally:
            if attempt is not None:
                attempt.set()

    def _failed(self, state: ServerState, reason: str) -> None:
        # Its tools stay bound but hidden until a connect succeeds and binds them again.
        for exposed in state.tools:
            self.session.tools.deactivate(exposed)
        state.failures += 1
        state.status = "unavailable"
        state.reason = self.redactor.redact(reason)
        state.next_retry = self._clock() + self._settings.backoff(state.failures)
        logger.info("%s in %s is unavailable: %s", state.entry.name, self.session.scope, state.reason)

    async def wait_for_connects(self) -> None:
        """Wait for the connects in flight; each is bounded by the connect timeout."""
        with anyio.move_on_after(self._settings.connection.connect_timeout + CONNECT_WAIT_MARGIN):
            for state in list(self.servers.values()):
                if state.attempt is not None:
                    await state.attempt.wait()

    async def before_turn(self) -> None:
        """BeforeAgentStart: reconcile, retry what is due, wait for connects, write the section."""
        await self.reconcile()
        now = self._clock()
        for state in self.servers.values():
            if state.status == "unavailable" and not state.connecting and (state.next_retry or 0) <= now:
                self._start(state)
        await self.wait_for_connects()
        self.session.prompt.set(SECTION_TITLE, self.section())

    async def add_now(self, entry: ServerEntry) -> ServerState:
        """After ``/mcp_add`` saved ``entry``: pick it up and wait for its connect."""
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
        if state.attempt is not None:
            with anyio.move_on_after(self._settings.connection.connect_timeout + CONNECT_WAIT_MARGIN):
                await state.attempt.wait()
        self.session.prompt.set(SECTION_TITLE, self.section())
        return state

    async def file_changed(self) -> None:
        """After ``/mcp_remove`` or ``/mcp_restore`` changed the file."""
        await self.reconcile()
        self.session.prompt.set(SECTION_TITLE, self.section())

    # Tools

    def _bind(self, state: ServerState, connection: Connection) -> None:
        entry = state.entry
        allowed: dict[str, mcp_types.Tool] = {}
        state.withheld = []
        for tool in connection.tools:
            if (entry.tools is None or tool.name in entry.tools) and tool.name not in allowed:
                if self.redactor.contains(tool.model_dump_json(by_alias=True)):
                    # Its name, title, description or schema quotes a credential: the model must
                    # not see it, and redacting a definition would change what the tool means.
                    shown = self.redactor.redact(tool.name)
                    shown = shown if len(shown) <= 40 else shown[:39] + "…"
                    state.withheld.append(f"{shown!r}: its definition holds a credential")
                    continue
                allowed[tool.name] = tool
        # A server offering hundreds of tools would drown the model (and slow every step); the
        # owner picks the ones they want with --tools.
        limit = self._settings.max_tools_per_server
        state.hidden = max(0, len(allowed) - limit)
        allowed = dict(list(allowed.items())[:limit])
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
                    call=partial(self._call, state, names[remote]),
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

    def withheld(self, state: ServerState) -> list[tuple[str, str]]:
        """The server's tools that the model in use cannot take, with the reason for each."""
        found: list[tuple[str, str]] = []
        for exposed in state.tools:
            reason = self.session.tool_rules.withheld(self._tools[exposed])
            if reason is not None:
                found.append((exposed, reason))
        return found

    def tool(self, exposed: str) -> RemoteMcpTool | None:
        return self._tools.get(exposed)

    async def _call(
        self, state: ServerState, exposed: str, remote: str, arguments: dict[str, Any]
    ) -> ToolResult:
        connection = await self._connection_for_call(state)
        try:
            result = await connection.call_tool(
                remote, arguments, timeout=self._settings.connection.call_timeout
            )
        except (CallFailed, RemoteTimeout) as exc:
            # The connection marked itself broken: drop it; the next call reconnects. No retry:
            # the call may have had effects on the server.
            if state.connection is connection:
                state.connection = None
                state.reason = self.redactor.redact(exc.reason)
                self._tg.start_soon(connection.aclose)
            return ToolResult.error(
                f"{exposed} failed: {exc.reason}. The call was not retried; the next call reconnects."
            )
        except RemoteError as exc:
            # The server answered with an error: the connection is fine and stays.
            return ToolResult.error(f"{exposed} failed: {exc.reason}")
        # Not cut here: the host's model-bound gate redacts first, then cuts.
        return map_result(result)

    async def _connection_for_call(self, state: ServerState) -> Connection:
        connection = state.connection
        if connection is not None and not connection.broken:
            return connection  # the common case, without the lock's cost on every call
        async with state.lock:
            connection = state.connection
            if connection is not None and not connection.broken:
                return connection
            if self.servers.get(state.entry.name) is not state:
                raise ToolError(f"{state.entry.name} was removed")
            if state.connecting and state.attempt is not None:
                await state.attempt.wait()
            else:
                state.connection = None
                state.attempt = anyio.Event()
                await self._connect(state)
            if state.connection is None:
                raise ToolError(f"{state.entry.name} is unavailable: {state.reason}")
            return state.connection

    # Showing

    def _retry_text(self, state: ServerState) -> str:
        if state.next_retry is None:
            return ""
        wait = max(0, round(state.next_retry - self._clock()))
        at = datetime.fromtimestamp(state.next_retry, UTC).strftime("%H:%M:%S UTC")
        return f"; next retry at {at} (in {wait} s)"

    def state_text(self, state: ServerState, *, retry: bool = True) -> str:
        """The server's state in words; ``retry=False`` leaves out when it is retried, which
        changes every second and must not enter the prompt (it would defeat prompt caching)."""
        if state.status == "connecting":
            return "connecting"
        if state.status == "unavailable":
            return f"unavailable: {state.reason}{self._retry_text(state) if retry else ''}"
        text = f"connected over {state.connection.transport if state.connection else 'http'}, {len(state.tools)} tools"
        if state.hidden:
            text += f" ({state.hidden} more not exposed: choose with --tools)"
        if state.withheld:
            text += f"; {len(state.withheld)} withheld: " + "; ".join(state.withheld)
        if state.connection is None and state.reason:
            text += f" (last call failed: {state.reason}; the next call reconnects)"
        return text

    def section(self) -> str | None:
        """The "Remote MCP servers" prompt section, or None when there is nothing to say."""
        if not self.servers and not self.rejected and not self.warning:
            return None
        lines = ["Servers the chat's owner connected (only the owner can add, change or remove them):"]
        for name, state in sorted(self.servers.items()):
            if state.status == "connected":
                withheld = {tool for tool, _ in self.withheld(state)}
                usable = [tool for tool in state.tools if tool not in withheld]
                shown = ", ".join(usable[:_SECTION_TOOLS])
                more = len(usable) - _SECTION_TOOLS
                shown += f", and {more} more" if more > 0 else ""
                lines.append(f"- {name}: available, {len(usable)} tools ({shown})")
            else:
                lines.append(f"- {name}: {self.state_text(state, retry=False)}")
        if self.rejected:
            # A count, never the names: whoever wrote the file chose them, and they would sit in
            # the prompt every turn (a 1 MB name, or 15,000 entries, or an instruction).
            count = len(self.rejected)
            entries = "1 entry" if count == 1 else f"{count} entries"
            lines.append(f"- {entries} of servers.json failed verification; the owner sees them in /mcp_list")
        if self.warning:
            lines.append(f"- servers.json cannot be used: {self.warning}")
        return self.redactor.redact("\n".join(lines))

    async def close(self) -> None:
        """Close every connection at once; each close is bounded by the close timeout."""
        connections = [connection for name in list(self.servers) if (connection := self._drop(name))]
        async with anyio.create_task_group() as tg:
            for connection in connections:
                tg.start_soon(connection.aclose)


def _endpoint(entry: ServerEntry) -> Endpoint:
    return Endpoint(
        server=entry.name,
        url=entry.url,
        transport=entry.transport,
        headers=entry.headers,
        url_secrets=entry.secrets - set(entry.headers.values()),
    )
