"""The agent's tools for the resources of a chat's servers: list them, read one, open a resource link.

Two tools, ``list_resources`` and ``read_resource``, offered while a connected server of the
chat declares resources. What they return is a tool result like any other: it passes the
ToolResultEvent hooks (the flow guard learns the server as its source) and the model-bound
gate, which redacts every credential the chat knows and cuts it, so resource text has the one
rule of tool results and never enters the system prompt. Each answer of a server is bounded by
the result budget (a larger one fails clearly); a binary resource goes to the workspace
(``_resource_files``) and the agent is told the path.

Trust: a read goes to the one server the model names, and only to a server of the chat; a
``resource_link`` in a tool result says to read it through the server that returned it.
Playa never opens a URI itself (no ``file://`` from the host's disk, no HTTP fetch): a URI is
the server's to interpret. A URI that carries data read in the turn from another source is a
flow like a tool call's arguments (``FlowGuard.held``): under ``ask`` the read is refused.

Subscriptions: where a server offers them, a resource the agent read is subscribed on that
connection (``transport.subscribe_resource``; for a 2026-07-28 session, a ``subscriptions/listen``
stream naming the URIs read, opened again in the chat's task group when one is added). A read
always asks the server, so it always returns the content as it is then; an update the server
sends marks the resource, and the listing and the next read say that it changed since the agent
read it. A reconnect starts without subscriptions: the next read subscribes again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

import anyio
import anyio.to_thread
import mcp_types
from anyio.abc import TaskGroup

from ..core import ChatSession, Redactor, ToolResult, one_line
from ..exceptions import CallFailed, RemoteError, RemoteTimeout, ToolError, WorkspaceError
from ..mcp import LinkHint, decode_base64
from ._flow import FlowGuard, FlowSource
from ._policies import Policies
from ._resource_files import save_blob
from ._server import RemoteServer
from .store import AuditLog
from .transport import (
    Connection,
    ResourceListing,
    follow_resource_updates,
    format_size,
    list_resources,
    listens_for_updates,
    offers_resources,
    read_resource,
    subscribe_resource,
)

__all__ = ["LIST_TOOL", "READ_METHOD", "READ_TOOL", "ResourceTools", "resource_link_hint"]

logger = logging.getLogger(__name__)

LIST_TOOL: Final = "list_resources"
READ_TOOL: Final = "read_resource"
READ_METHOD: Final = "resources/read"
"""The name the owner's policies know reads by (``/mcp_policy <server> resources/read ask``)."""
MAX_URI: Final = 8192
"""The longest URI the agent may ask for: a URI is an address, not a payload."""

_LIST_DESCRIPTION = (
    "List the resources (documents, files, records) and resource templates that this chat's MCP "
    "servers offer, with the URI of each. Give `server` to list one server's only. Read a resource "
    f"with {READ_TOOL}; fill in a template's {{placeholders}} to make a URI."
)
_READ_DESCRIPTION = (
    "Read a resource of one of this chat's MCP servers by its URI, through that server: a URI "
    f"from {LIST_TOOL}, a template filled in, or a resource link a tool returned (read it through "
    "the server whose tool returned it). Text comes back here; binary content is saved in the "
    "workspace and its path is given."
)
_LIST_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {"server": {"type": "string", "description": "Only this server's resources."}},
    "additionalProperties": False,
}
_READ_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "server": {"type": "string", "description": "The server that offers the resource."},
        "uri": {"type": "string", "description": "The resource's URI."},
    },
    "required": ["server", "uri"],
    "additionalProperties": False,
}


def resource_link_hint(server: str) -> LinkHint:
    """The line under a ``resource_link`` of ``server``'s tool result: how the agent opens it."""

    def hint(link: mcp_types.ResourceLink) -> str:
        arguments = json.dumps({"server": server, "uri": link.uri}, ensure_ascii=False)
        return f"(open it with {READ_TOOL} {arguments})"

    return hint


@dataclass(slots=True)
class _ResourceTool:
    """A registry tool that runs in the chat's ``ResourceTools`` of now (the registry keeps a tool
    for ever; a chat whose scope moved makes new ones, which take the tools over)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[ToolResult]]

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        return await self.run(arguments)


@dataclass(eq=False, repr=False)
class ResourceTools:
    """One chat's resource tools: registered once, offered while a server of the chat has resources."""

    session: ChatSession
    servers: Mapping[str, RemoteServer]
    """The chat's servers now, by name (read only)."""
    _: KW_ONLY
    flows: FlowGuard
    policies: Policies
    audit: AuditLog
    redactor: Callable[[], Redactor]
    """Their credentials' redactor as it is now."""
    task_group: TaskGroup
    timeout: float
    """Each request's."""
    max_pages: int
    _listeners: dict[str, anyio.CancelScope] = field(init=False, default_factory=dict)
    """Each server's stream of resource updates (2026-07-28), by name."""
    _tools: tuple[_ResourceTool, ...] = field(init=False)

    def __post_init__(self) -> None:
        self._tools = (
            self._take(LIST_TOOL, _LIST_DESCRIPTION, _LIST_SCHEMA, self._list),
            self._take(READ_TOOL, _READ_DESCRIPTION, _READ_SCHEMA, self._read),
        )

    def _take(
        self,
        name: str,
        description: str,
        schema: Mapping[str, Any],
        run: Callable[[dict[str, Any]], Awaitable[ToolResult]],
    ) -> _ResourceTool:
        """The chat's tool of this name, registered now or taken over from the chat's earlier tools."""
        tools = self.session.tools
        if name in tools and isinstance(existing := tools.get(name), _ResourceTool):
            existing.run = run
            return existing
        tool = _ResourceTool(name, description, schema, run)
        tools.register(tool, active=False)
        self.session.kept_whole.add(name)
        return tool

    def offer(self) -> None:
        """Offer the tools while a connected server of the chat declares resources; else withdraw them."""
        wanted = any(self._connected(server) is not None for server in self.servers.values())
        for tool in self._tools:
            if wanted:
                self.session.tools.activate(tool.name)
            else:
                self.session.tools.deactivate(tool.name)

    def sources(self, tool: str, arguments: Mapping[str, Any]) -> tuple[FlowSource, ...]:
        """The sources of a result of ``tool`` for the flow guard: the server it read from, or for a
        listing of all, every server with resources (none: not one of these tools)."""
        if tool not in (LIST_TOOL, READ_TOOL):
            return ()
        server = arguments.get("server")
        if isinstance(server, str):
            return (FlowSource.of_server(server),) if server in self.servers else ()
        if tool == LIST_TOOL and server is None:
            names = sorted(name for name, state in self.servers.items() if self._connected(state) is not None)
            return tuple(FlowSource.of_server(name) for name in names)
        return ()

    @staticmethod
    def _connected(server: RemoteServer) -> Connection | None:
        connection = server.connection
        if connection is None or connection.broken or not offers_resources(connection):
            return None
        return connection

    # list_resources

    async def _list(self, arguments: dict[str, Any]) -> ToolResult:
        named = arguments.get("server")
        if named is not None:
            problem = self._server_problem(named)
            if problem is not None:
                return ToolResult.error(problem)
            assert isinstance(named, str)
            chosen = [self.servers[named]]
        else:
            chosen = [server for server in self.servers.values() if self._connected(server) is not None]
            if not chosen:
                return ToolResult.error(
                    f"No server of this chat offers resources now. {self._with_resources()}"
                )
        parts: list[str] = []
        failed = 0
        for server in chosen:
            text, ok = await self._list_one(server)
            parts.append(text)
            failed += not ok
        return ToolResult("\n\n".join(parts), is_error=failed == len(chosen))

    async def _list_one(self, server: RemoteServer) -> tuple[str, bool]:
        name = server.entry.name
        if self.policies.of(server, READ_METHOD) == "deny":
            # A listing carries nothing of the turn, so only a denial keeps it from the server.
            return f"{name}: the owner's policy does not allow reading its resources.", False
        try:
            connection = await server.connection_for_call()
        except ToolError as exc:
            return f"{name}: {exc}", False
        if not offers_resources(connection):
            return f"{name}: this server offers no resources.", False
        try:
            listing = await list_resources(connection, timeout=self.timeout, max_pages=self.max_pages)
        except (CallFailed, RemoteTimeout) as exc:
            server.call_failed(connection, exc)
            return f"{name}: listing its resources failed: {exc.explained}", False
        except RemoteError as exc:
            return f"{name}: listing its resources failed: {exc.explained}", False
        return _listing_text(name, listing, connection.resource_updates.changed), True

    # read_resource

    async def _read(self, arguments: dict[str, Any]) -> ToolResult:
        server_name, uri = arguments.get("server"), arguments.get("uri")
        problem = self._server_problem(server_name)
        if problem is not None:
            return ToolResult.error(problem)
        assert isinstance(server_name, str)
        if not isinstance(uri, str) or not uri.strip():
            return ToolResult.error(f"{READ_TOOL} needs the resource's URI as text")
        if len(uri) > MAX_URI or any(ord(c) < 0x20 or c == "\x7f" for c in uri):
            return ToolResult.error(
                f"that URI is not an address: longer than {MAX_URI} characters or holding control characters"
            )
        server = self.servers[server_name]
        # A read is a call like any other: the owner's policy for the server (or for
        # ``resources/read`` itself) applies, and a URI carrying another source's data of the
        # turn is put to the owner as a call's arguments would be.
        read_only = self.policies.read_only(server, READ_METHOD)
        held = self.flows.held(server_name, READ_METHOD, {"uri": uri}, read_only=read_only)
        permit = await self.policies.permit(
            server, READ_TOOL, READ_METHOD, {"uri": uri}, flows=[flow.describe() for flow in held]
        )
        if permit.refusal is not None:
            return ToolResult.error(permit.refusal)
        result: ToolResult | None = None
        try:
            result = await self._read_from(server, uri)
            return result
        finally:
            sender = self.session.turn_sender
            self.audit.record(
                "resource_read",
                sender=sender.id if sender is not None else None,
                server=server_name,
                outcome="error" if result is None or result.is_error else "ok",
                result_bytes=len(result.text.encode()) if result is not None else 0,
            )

    async def _read_from(self, server: RemoteServer, uri: str) -> ToolResult:
        name = server.entry.name
        try:
            connection = await server.connection_for_call()
        except ToolError as exc:
            return ToolResult.error(str(exc))
        if not offers_resources(connection):
            return ToolResult.error(f"{name} offers no resources. {self._with_resources()}")
        # Taken before the read: an update that comes while it runs marks the resource again.
        updates = connection.resource_updates
        changed = updates.take(uri)
        try:
            answer = await read_resource(connection, uri, timeout=self.timeout)
        except (CallFailed, RemoteTimeout) as exc:
            server.call_failed(connection, exc)
            return ToolResult.error(
                f"reading it from {name} failed: {exc.explained}. The next read reconnects."
            )
        except RemoteError as exc:
            if changed:
                updates.heard(uri)  # not read after all: still changed since the agent read it
            return ToolResult.error(f"reading it from {name} failed: {exc.explained}")
        parts = [f"Resource {uri} of {name}" + (" (it changed since you last read it):" if changed else ":")]
        for item in answer.contents:
            parts.append(await self._content(name, item))
        if not answer.contents:
            parts.append("(the server returned no contents for it)")
        if await self._subscribe(server, connection, uri):
            parts.append(f"(subscribed: {LIST_TOOL} marks it if {name} says it changed)")
        return ToolResult("\n".join(parts))

    def _listen(self, server: str, connection: Connection) -> None:
        """Open the connection's update stream again for what it subscribes to now (2026-07-28):
        the old stream's filter lacks the new URI. One stream per server, in the chat's task group."""
        before = self._listeners.pop(server, None)
        if before is not None:
            before.cancel()
        scope = self._listeners[server] = anyio.CancelScope()
        self.task_group.start_soon(
            self._follow, server, connection, sorted(connection.resource_updates.subscribed), scope
        )

    async def _follow(
        self, server: str, connection: Connection, uris: list[str], scope: anyio.CancelScope
    ) -> None:
        with scope:
            try:
                await follow_resource_updates(connection, uris)
            except Exception as exc:  # boundary: without the stream only the change marks are lost
                logger.info("%s: no stream of resource updates: %s", server, type(exc).__name__)
        if self._listeners.get(server) is scope:
            del self._listeners[server]

    def close(self) -> None:
        """The chat closes: its update streams end."""
        for scope in self._listeners.values():
            scope.cancel()
        self._listeners.clear()

    async def _content(
        self, server: str, item: mcp_types.TextResourceContents | mcp_types.BlobResourceContents
    ) -> str:
        mime = item.mime_type or "unknown type"
        if isinstance(item, mcp_types.TextResourceContents):
            return f"[text {item.uri} ({mime})]\n{item.text}"
        data = decode_base64(item.blob)
        if data is None:
            return f"[binary {item.uri} ({mime}) not saved: its data is not valid base64]"
        if self.redactor().contains_bytes(data):
            # Bytes cannot be redacted in place, and a file in the workspace passes no gate until
            # it is read: one that quotes a credential is not written at all.
            return f"[binary {item.uri} ({mime}, {len(data):,} bytes) withheld: it holds a credential]"
        try:
            path = await save_blob(self.session.files, server, item.uri, item.mime_type, data)
        except WorkspaceError as exc:
            return f"[binary {item.uri} ({mime}, {len(data):,} bytes) not saved: {exc}]"
        except OSError as exc:
            return f"[binary {item.uri} ({mime}, {len(data):,} bytes) not saved: {exc.strerror}]"
        return f"[binary {item.uri} ({mime}, {len(data):,} bytes) saved in the workspace as {path}]"

    async def _subscribe(self, server: RemoteServer, connection: Connection, uri: str) -> bool:
        try:
            known = uri in connection.resource_updates.subscribed
            subscribed = await subscribe_resource(connection, uri, timeout=self.timeout)
            if subscribed and not known and listens_for_updates(connection):
                self._listen(server.entry.name, connection)
            return subscribed
        except (CallFailed, RemoteTimeout) as exc:
            server.call_failed(connection, exc)
        except RemoteError as exc:
            # The read worked; a server refusing the subscription only loses the change marks.
            logger.info("%s: subscribing to a resource failed: %s", server.entry.name, exc.reason)
        return False

    # Shared

    def _server_problem(self, name: object) -> str | None:
        """Why ``name`` names no server of this chat with resources (None: it does); nothing is sent then."""
        if not isinstance(name, str) or not name:
            return f"give `server`, the name of one of this chat's servers. {self._with_resources()}"
        if name not in self.servers:
            # Redacted before it is cut: a cut could leave a piece of a key the redactor cannot find.
            redact = self.session.redact
            shown = one_line(redact(name) if redact is not None else name)
            shown = shown if len(shown) <= 40 else shown[:39] + "…"
            return f"{shown!r} is not a server of this chat. {self._with_resources()}"
        return None

    def _with_resources(self) -> str:
        names = sorted(name for name, server in self.servers.items() if self._connected(server) is not None)
        return (
            f"Servers with resources now: {', '.join(names)}." if names else "No server offers resources now."
        )


def _listing_text(server: str, listing: ResourceListing, changed: set[str]) -> str:
    lines = [f"{server}: {len(listing.resources)} resource(s), {len(listing.templates)} template(s)."]
    for resource in listing.resources:
        mark = " (changed since you read it)" if resource.uri in changed else ""
        lines.append(f"- {resource.uri}{mark} — {_about(resource.name, resource.title, resource.mime_type)}")
        if resource.size is not None:
            lines[-1] += f", {format_size(resource.size)}"
        if resource.description:
            lines[-1] += f": {one_line(resource.description)}"
    for template in listing.templates:
        lines.append(
            f"- template {template.uri_template} — {_about(template.name, template.title, template.mime_type)}"
        )
        if template.description:
            lines[-1] += f": {one_line(template.description)}"
    if listing.truncated:
        lines.append("(the server has more; only the first pages were listed)")
    return "\n".join(lines)


def _about(name: str, title: str | None, mime: str | None) -> str:
    about = name if not title or title == name else f"{name} ({title})"
    return f"{about}, {mime}" if mime else about
