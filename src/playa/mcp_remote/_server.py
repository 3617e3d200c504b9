"""One remote server of a chat: its entry, its connection and retries, its tool binding, its login and review.

A ``RemoteServer`` is the only writer of its own fields; its login (``ServerLogin``) and its
review (``ServerReview``) are objects of its own, each the only writer of theirs. A server tells
the chat that holds it what happened through ``ServerEvents``, and never reaches into it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal, Protocol

import anyio
import mcp_types
from anyio.abc import TaskGroup
from mcp.client.caching import InMemoryResponseCacheStore

from ..core import ChatSession, ToolResult
from ..exceptions import AccessRefused, NeedsLogin, RemoteError, StoreError, ToolError
from ..mcp import exposed_names, normalize_schema
from ._callback_listener import Callbacks
from ._elicit import asking
from ._server_login import LoginOwner, LoginStart, ServerLogin
from ._server_review import ServerReview
from ._settings import RemoteMcpSettings
from ._shared import Asker, ChatSecrets, Revoker
from ._tool import Binding, ToolSlots
from .store import AuditLog, OAuthGrant, Pins, Policy, ServerEntry, ServerStorage, without_format
from .transport import Connection, Connector, Endpoint, GrantStorage, ServerAuth

__all__ = [
    "ChatContext",
    "LoginOwner",
    "LoginStart",
    "RemoteServer",
    "ServerEvents",
    "ServerLogin",
    "ToolCaller",
    "login_hint",
    "wait_for_connects",
]

logger = logging.getLogger(__name__)


def login_hint(reason: str, name: str) -> str:
    """Why a server is unavailable, with what the owner can do about it."""
    return f"{reason} — the owner can run /mcp_auth {name}"


class ServerEvents(Protocol):
    """What a server tells the chat that holds it: what happened, never a request."""

    async def bound(self, server: RemoteServer, adopted: Pins | None) -> None:
        """A connection's tool list was bound; ``adopted``: the pins an entry without any takes."""

    def changed(self) -> None:
        """What the prompt says of the chat's servers may have changed."""


class ToolCaller(Protocol):
    """Calls a server's tool for the model (the chat's ``Calls``)."""

    async def call(
        self, server: RemoteServer, exposed: str, remote: str, arguments: dict[str, Any]
    ) -> ToolResult: ...


@dataclass(frozen=True, eq=False)
class ChatContext:
    """What one chat's servers and the service's parts work with, made once by ``ChatServers``."""

    session: ChatSession
    store: ServerStorage | None
    settings: RemoteMcpSettings
    connector: Connector
    callbacks: Callbacks
    task_group: TaskGroup
    clock: Callable[[], float]
    secrets: ChatSecrets
    audit: AuditLog
    tools: ToolSlots
    asker: Asker
    revoker: Revoker
    events: ServerEvents
    servers: Mapping[str, RemoteServer]
    """The chat's servers now, by name (read only)."""


class RemoteServer:
    """One server of a chat: connected, retried, bound to the chat's tools, logged in and reviewed."""

    def __init__(self, entry: ServerEntry, context: ChatContext, caller: ToolCaller) -> None:
        self.entry = entry
        self._built_from = entry
        """The entry as this server last read or wrote it: its writes land only over that server."""
        self._writing = anyio.Lock()
        """Held while this server seals its entry: one write at a time, in the order they came."""
        self._context = context
        self._caller = caller
        self.status: Literal["connecting", "connected", "unavailable"] = "connecting"
        self.connection: Connection | None = None
        self.reason: str | None = None
        """Why it is unavailable, or why its last call dropped the connection: Playa's own words
        (``RemoteError.reason``), which the model's prompt may carry."""
        self.detail: str | None = None
        """What the server itself said of that failure (``RemoteError.detail``), redacted and cut:
        its words, for the owner's ``/mcp_list`` only, never the prompt."""
        self.failures = 0
        self.next_retry: float | None = None
        self.attempt: anyio.Event | None = None
        """Set when the connect attempt in flight ends; None when none is in flight."""
        self.lock = anyio.Lock()
        self.needs_login = False
        """Unavailable until the owner logs in (``/mcp_auth``): never retried on a timer."""
        self.tools: list[str] = []
        """The exposed names of the tools bound to this server."""
        self.hidden = 0
        """How many more tools the server offers beyond the per-server limit."""
        self.withheld: list[str] = []
        """Tools never offered to the model, each with why (safe to show: redacted and cut)."""
        self.transport: str | None = None
        """The transport of the last connection that worked (SSE after a fallback too)."""
        self.protocol: str | None = None
        """The protocol version agreed on that connection."""
        self.tools_cache = InMemoryResponseCacheStore()
        """Its tool listings, kept as the server allows (``ttlMs``) across this entry's reconnects."""
        self.login = ServerLogin()
        self.review = ServerReview()

    @property
    def connecting(self) -> bool:
        return self.attempt is not None and not self.attempt.is_set()

    @property
    def current(self) -> bool:
        """Whether the chat still holds this server (not removed or replaced)."""
        return self._context.servers.get(self.entry.name) is self

    # Connecting

    def start(self, *, after_login: bool = False) -> None:
        """Connect in the background; ``after_login``: the first connect with the owner's new login."""
        self.status = "connecting"
        self.attempt = anyio.Event()
        self._context.task_group.start_soon(partial(self._connect, after_login=after_login))

    async def wait(self) -> None:
        """Wait for the connect in flight, bounded by the connect wait."""
        if self.attempt is not None:
            with anyio.move_on_after(self._context.settings.connect_wait):
                await self.attempt.wait()

    async def reconnect(self) -> None:
        """Connect with the owner's new login, and wait for the connect."""
        self.start(after_login=True)
        await self.wait()
        self._context.events.changed()

    def grant(self) -> GrantStorage:
        """The grant of an ``oauth`` server, kept across connects (tokens refresh in place)."""
        return self.login.storage(self.entry, self.save_grant, self._context.clock)

    def _endpoint(self) -> Endpoint:
        entry, context = self.entry, self._context
        auth = None
        if entry.auth_kind == "oauth":
            auth = ServerAuth(
                entry.url,
                self.grant(),
                redirect_uri=context.callbacks.redirect_uri_or_placeholder,
                clock=context.clock,
                on_refresh_failed=self._refresh_failed,
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

    def _refresh_failed(self, status: int) -> None:
        """The authorization server refused to refresh the tokens: the owner's login must help."""
        self._context.audit.record("refresh_failed", server=self.entry.name, status=status)

    async def _connect(self, *, after_login: bool = False) -> None:
        attempt, name, context = self.attempt, self.entry.name, self._context
        connection: Connection | None = None
        endpoint: Endpoint | None = None
        # The boundary covers every step, binding included: this runs in the task group every
        # chat of the host shares, and an exception escaping it would end them all.
        try:
            grant = self.grant().grant if self.entry.auth_kind == "oauth" else None
            if grant is not None and not grant.authorized and not grant.machine:
                # No tokens yet: only the owner's login can help (a machine client gets its own),
                # and a connect would only register clients with the authorization server for nothing.
                raise NeedsLogin("this server needs a login", server=name)
            endpoint = self._endpoint()
            connection = await context.connector.connect(
                endpoint,
                context.task_group,
                elicit=asking(endpoint, context.asker.server_question, context.secrets.redact),
                on_tools=self._tools_changed,
                tools_cache=self.tools_cache,
            )
            if not self.current:
                # Removed or replaced while connecting.
                await connection.aclose()
                return
            adopted = self.review.hold_instructions(
                self.entry, connection.instructions, self.bind(connection), context.secrets.redact
            )
            self.connection, self.status, self.reason, self.detail = connection, "connected", None, None
            self.transport, self.protocol = connection.transport, connection.protocol
            self.failures, self.next_retry, self.needs_login = 0, None, False
            self.login.counted(refused=False)
            if self.entry.auth_kind != "oauth" and (superseded := self.login.abandon()) is not None:
                # It replaced an OAuth entry and needs no login: the old tokens are abandoned.
                context.task_group.start_soon(context.revoker.abandoned, name, superseded)
            await context.events.bound(self, adopted)
        except RemoteError as exc:
            if self.current:
                if endpoint is not None and endpoint.auth is not None:
                    self.login.wants(endpoint.auth.scope)
                refused = isinstance(exc, AccessRefused)
                if refused and after_login:
                    self.login.counted(refused=True)
                self.failed(
                    exc.reason, needs_login=isinstance(exc, NeedsLogin), refused=refused, detail=exc.detail
                )
        except Exception as exc:  # boundary: one server's bug must not end the chat's task group
            logger.error("connecting %s in %s failed: %s", name, context.session.scope, type(exc).__name__)
            if connection is not None:
                context.task_group.start_soon(connection.aclose)
            if self.current:
                self.failed(f"internal error ({type(exc).__name__})")
        finally:
            if attempt is not None:
                attempt.set()

    def failed(
        self, reason: str, *, needs_login: bool = False, refused: bool = False, detail: str | None = None
    ) -> None:
        """``refused``: the server refused a login's token for the scopes it granted (``AccessRefused``).

        ``reason`` is Playa's words, for the prompt too; ``detail`` what the server said, for the owner only.
        """
        # Its tools stay bound but hidden until a connect succeeds and binds them again.
        self._context.tools.hide(self.tools)
        self.failures += 1
        self.status = "unavailable"
        self.needs_login = needs_login
        if refused and self.login.refused >= 2:
            # A login in answer to the refusal did not help: suggesting another would be a loop.
            reason += ", and again after a new login: the account needs access at the server itself"
        elif refused and (grant := self.login.held(self.entry)) is not None and grant.machine:
            # A machine client logs in to nothing: its owner gives it new credentials, or a new URL.
            reason += f" — the owner can give it new credentials with /mcp_add {self.entry.name}"
        elif refused:
            # The account's access may have changed since the token was issued: one new login may help.
            reason = f"{login_hint(reason, self.entry.name)} to log in again"
        elif needs_login:
            # A timer cannot log in: the server waits for the owner.
            reason = login_hint(reason, self.entry.name)
        redact = self._context.secrets.redact
        self.reason = redact(reason)
        self.detail = redact(detail) if detail is not None else None
        settings = self._context.settings
        self.next_retry = None if needs_login else self._context.clock() + settings.backoff(self.failures)
        logger.info("%s in %s is unavailable: %s", self.entry.name, self._context.session.scope, self.reason)

    async def connection_for_call(self) -> Connection:
        """The working connection: a broken one is replaced (one connect at a time)."""
        connection = self.connection
        if connection is not None and not connection.broken:
            return connection  # the common case, without the lock's cost on every call
        async with self.lock:
            connection = self.connection
            if connection is not None and not connection.broken:
                return connection
            if not self.current:
                raise ToolError(f"{self.entry.name} was removed")
            if self.connecting and self.attempt is not None:
                await self.attempt.wait()
            else:
                self.connection = None
                self.attempt = anyio.Event()
                await self._connect()
            if self.connection is None:
                raise ToolError(f"{self.entry.name} is unavailable: {self.reason}")
            return self.connection

    def call_failed(self, connection: Connection, exc: RemoteError) -> None:
        """A call broke ``connection``: it is dropped, and the next call reconnects."""
        if self.connection is connection:
            redact = self._context.secrets.redact
            self.connection = None
            self.reason = redact(exc.reason)
            self.detail = redact(exc.detail) if exc.detail is not None else None
            self._context.task_group.start_soon(connection.aclose)

    def call_needs_login(self, connection: Connection, reason: str) -> bool:
        """A call was refused for want of a login (or a scope): the server waits for the owner.

        Returns whether a login with a further scope would help (a step-up).
        """
        if self.connection is connection:
            self.connection = None
            self._context.task_group.start_soon(connection.aclose)
        auth = connection.endpoint.auth
        self.login.wants(auth.scope if auth is not None else None)
        self.failed(reason, needs_login=True)
        self._context.events.changed()
        return auth is not None and bool(auth.scope)

    def take_connection(self) -> Connection | None:
        """The connection, no longer the server's: the caller closes it."""
        connection, self.connection = self.connection, None
        return connection

    def drop(self) -> Connection | None:
        """The chat forgets this server: its tools are unbound; the caller closes the connection returned."""
        self._context.tools.unbind(self.tools)
        self.tools = []
        return self.take_connection()

    # Tools

    def bind(self, connection: Connection) -> Pins | None:
        """Bind the server's live tools; hold back new and changed ones; unbind the rest at once.

        Returns the pins to save when the entry had none: the list it adopts as approved.
        """
        entry, context = self.entry, self._context
        allowed: dict[str, mcp_types.Tool] = {}
        keys: dict[str, bytes] = {}
        withheld: list[str] = []
        redactor, redact = context.secrets.redactor, context.secrets.redact
        for tool in connection.tools:
            if (entry.tools is None or tool.name in entry.tools) and tool.name not in allowed:
                dumped = tool.model_dump_json(by_alias=True)
                if redactor.contains(without_format(dumped)):
                    # Its name, title, description or schema quotes a credential: the model must
                    # not see it, and redacting a definition would change what the tool means.
                    withheld.append(f"{_shown(redact, tool.name)!r}: its definition holds a credential")
                    continue
                if (why := connection.unrunnable(tool)) is not None:
                    # Offered, it could only fail: the model would call it for nothing.
                    withheld.append(f"{_shown(redact, tool.name)!r}: {why}")
                    continue
                allowed[tool.name] = tool
                # Every chat of a bot binds the same definitions: each schema is normalized once.
                keys[tool.name] = hashlib.sha256(dumped.encode()).digest()
        # A server offering hundreds of tools would drown the model (and slow every step); the
        # owner picks the ones they want with --tools.
        limit = context.settings.max_tools_per_server
        self.hidden = max(0, len(allowed) - limit)
        allowed = dict(list(allowed.items())[:limit])
        allowed, adopted = self.review.hold_tools(entry, allowed)
        default = context.settings.default_policy
        for remote in [remote for remote in allowed if entry.policy.of(remote, default) == "deny"]:
            # The owner's policy: the model is never offered it (a call all the same is refused).
            del allowed[remote]
            withheld.append(f"{_shown(redact, remote)!r}: your policy denies it")
        self.withheld = withheld
        names = exposed_names(entry.name, allowed)
        # Every binding is made before the registry changes: a step that raises leaves the
        # chat's tools as they were.
        bindings: dict[str, Binding] = {}
        for remote, tool in allowed.items():
            # Not cut here: the model-bound gate cuts descriptions once they are redacted.
            description = (tool.description or tool.title or "").strip()
            bindings[names[remote]] = Binding(
                server=entry.name,
                remote_name=remote,
                description=f"[{entry.name}] {description}".strip(),
                parameters=normalize_schema(tool.input_schema, key=keys[remote]),
                call=partial(self._caller.call, self, names[remote]),
            )
        self.tools = context.tools.bind(bindings, self.tools)
        return adopted

    def rebind(self) -> None:
        """Bind the tools again after a policy changed: a denied one leaves the model's list."""
        connection, context = self.connection, self._context
        if (
            connection is not None
            and not connection.broken
            and (adopted := self.bind(connection)) is not None
        ):
            context.task_group.start_soon(context.events.bound, self, adopted)
        context.events.changed()

    async def _tools_changed(self, connection: Connection) -> None:
        """The server said its tool list changed, and the connection listed it again."""
        if not self.current or self.connection is not connection:
            return  # dropped or replaced meanwhile; a new connection lists its own tools
        await self._context.events.bound(self, self.bind(connection))
        self._context.events.changed()

    async def decided(self, pins: Pins) -> None:
        """The owner decided what waited: ``pins`` sealed, and what they allow bound at once."""
        connection = self.connection
        await self.save_pins(pins)
        rebound = connection is not None and not connection.broken
        if connection is not None and rebound:
            self.review.hold_instructions(
                self.entry, connection.instructions, self.bind(connection), self._context.secrets.redact
            )
        self.review.concluded(pins, rebound=rebound)
        self._context.events.changed()

    # The entry

    async def save_pins(self, pins: Pins) -> None:
        """Seal new pins into the entry (an owner's decision, or an adopted list)."""
        self.entry = replace(self.entry, pins=pins)
        await self._rewrite()

    async def seal_policy(self, policy: Policy) -> None:
        """Save the entry with ``policy`` and let it apply at once. Raises ``StoreError``, also when
        the owner replaced or removed the server meanwhile (nothing changed then)."""

        def change(entry: ServerEntry) -> ServerEntry:
            return replace(entry, policy=policy)

        if self._context.store is not None:
            if not await self._rewrite(change):
                raise StoreError(f"{self.entry.name} was replaced or removed meanwhile")
        elif self.current:
            self.entry = change(self.entry)
        if self.current:
            self.rebind()

    def policy_changed(self, policy: Policy) -> None:
        """The owner changed the policy through another process of this host: it applies now."""
        self.entry = replace(self.entry, policy=policy)
        self.rebind()

    async def save_grant(self, grant: OAuthGrant) -> bool:
        """Seal a changed grant (new tokens, a registration) into this server's entry before it is
        used; whether it was sealed. A server replaced or removed meanwhile seals nothing: its
        tokens are not the new entry's."""
        context = self._context
        context.secrets.remember(grant.secrets)
        self.entry = replace(self.entry, oauth=grant)
        try:
            return await self._rewrite()
        except StoreError as exc:
            # The connection goes on with the tokens held; the next refresh tries again.
            logger.warning(
                "could not save the authorization of %s in %s: %s",
                self.entry.name,
                context.session.scope,
                exc,
            )
            return False

    async def _rewrite(self, change: Callable[[ServerEntry], ServerEntry] = lambda entry: entry) -> bool:
        """Seal the entry as it is now (with ``change``, kept once written) over the stored one while
        that is still the entry this server was built from; whether it was written. Raises ``StoreError``.

        ``current`` alone is no guard: the owner's ``/mcp_add`` writes the new entry before the
        chat holds its server, and the store's write runs after an await; the store compares the
        stored entry under its own lock, so a late write of a replaced server is dropped there
        (and one of another process of this host, too). The server's own writes go one at a
        time, each with every change made before it: a token write and a pins write at once
        cannot land in the other order and lose the tokens.
        """
        store = self._context.store
        if store is None:
            return False
        async with self._writing:
            entry = change(self.entry)
            if not self.current or await store.rewrite(entry, built_from=self._built_from) is None:
                return False
            self._built_from = entry
            self.entry = change(self.entry)  # what a later write starts from
            return True


def _shown(redact: Callable[[str], str], name: str) -> str:
    """A server's tool name fit to show: redacted, then cut."""
    shown = redact(name)
    return shown if len(shown) <= 40 else shown[:39] + "…"


async def wait_for_connects(servers: Mapping[str, RemoteServer], wait: float) -> None:
    """Wait for the connects in flight; each is bounded by the connect timeout."""
    with anyio.move_on_after(wait):
        for server in list(servers.values()):
            if server.attempt is not None:
                await server.attempt.wait()
