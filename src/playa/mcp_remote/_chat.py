"""One chat's remote servers: the file reconciled, connections kept, tools bound, secrets redacted."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import mcp_types
from anyio.abc import TaskGroup
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

from ..exceptions import (
    AccessRefused,
    CallFailed,
    NeedsLogin,
    RemoteError,
    RemoteTimeout,
    StoreError,
    ToolError,
    UsageError,
)
from ..host import (
    QUESTION_TIMEOUT,
    UI,
    Answer,
    Approval,
    ChatSession,
    LateResult,
    Question,
    Redactor,
    ToolResult,
    outbound_secrets,
    render_approval,
)
from ..mcp import exposed_names, map_result, normalize_schema, server_name_problem
from ._settings import RemoteMcpSettings
from ._state import LoginStart, ServerState
from ._tool import Binding, RemoteMcpTool
from ._views import SECTION_TITLE, section, state_text
from .store._grant import OAuthGrant, resource_of
from .store._pins import Pins, change_of, field_digests, instructions_change, pending_digest, without_format
from .store._store import LoadResult, Rejected, Saved, ServerEntry, ServerStore
from .transport._connection import Connection, Connector, Endpoint, PendingTask
from .transport._oauth import Callbacks, GrantStorage, LoginExpired, PendingLogin, ServerAuth, duration_text
from .transport._progress import ProgressFeed
from .transport._revoke import Revocation, revoke

__all__ = ["CONNECT_WAIT_MARGIN", "ChatServers"]

logger = logging.getLogger(__name__)

CONNECT_WAIT_MARGIN = 1.0
"""Seconds a turn waits for connects in flight beyond the connect timeout that bounds each."""

Clock = Callable[[], float]


class _Undelivered(Exception):
    """The owner could not be sent the authorization link privately (no private chat with the bot)."""


def _login_hint(reason: str, name: str) -> str:
    return f"{reason} — the owner can run /mcp_auth {name}"


def _decided(name: str, tools: list[mcp_types.Tool], instructions: bool, *, approve: bool) -> str:
    """The reply to the owner's decision on a server's held tools and instructions."""
    names = ", ".join(sorted(tool.name for tool in tools))
    if approve:
        if not tools:
            return f"Approved the new instructions of {name}: the agent gets them from now on."
        also = ", and its new instructions" if instructions else ""
        return f"Approved {len(tools)} tool(s) of {name}: {names}{also}. The agent can use them now."
    if not tools:
        return (
            f"Rejected the new instructions of {name}: the agent keeps what you approved before "
            "until the server changes them again."
        )
    also = ", and its new instructions" if instructions else ""
    return (
        f"Rejected {len(tools)} tool(s) of {name}: {names}{also}. They stay hidden until the server "
        "changes them again."
    )


class ChatServers:
    """The remote MCP servers of one chat session, and the one service the owner's commands call.

    Each owner's action (``add``, ``remove``, ``restore``, ``start_login``) is one call that
    takes it from the file to the connections and the prompt. What is shown of the servers is
    written in ``_views``.
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
        self._callbacks = callbacks if callbacks is not None else Callbacks()
        self._clock = clock
        self._tools: dict[str, RemoteMcpTool] = {}
        self._secrets: frozenset[str] = frozenset()
        self._asking = anyio.Lock()
        """One question at a time: the person answers them in turn."""
        self.owner_ui: UI | None = None
        """The front end of the owner's latest command: where tool changes are shown to them."""
        self._untold: list[str] = []
        """What the owner must hear once a front end of theirs is known (``owner_seen``)."""

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

    def _start(self, state: ServerState, *, after_login: bool = False) -> None:
        state.status = "connecting"
        state.attempt = anyio.Event()
        self._tg.start_soon(partial(self._connect, state, after_login=after_login))

    def _grant(self, state: ServerState) -> GrantStorage:
        """The grant of an ``oauth`` server, kept across connects (tokens refresh in place)."""
        if state.grant is None:
            entry = state.entry
            grant = entry.oauth if entry.oauth is not None else OAuthGrant(resource=resource_of(entry.url))
            name = entry.name
            state.grant = GrantStorage(grant, lambda new: self._save_grant(name, new), clock=self._clock)
        return state.grant

    async def _save_grant(self, name: str, grant: OAuthGrant) -> bool:
        """Seal a changed grant into the entry (new tokens, a registration) before it is used.

        Returns whether it was sealed into the file.
        """
        self._remember(grant.secrets)
        state = self.servers.get(name)
        if self.store is None or state is None:
            return False
        entry = replace(state.entry, oauth=grant)
        state.entry = entry
        try:
            await anyio.to_thread.run_sync(self.store.put, entry)
        except StoreError as exc:
            # The connection goes on with the tokens held; the next refresh tries again.
            logger.warning("could not save the authorization of %s in %s: %s", name, self.session.scope, exc)
            return False
        return True

    def _endpoint(self, state: ServerState) -> Endpoint:
        entry = state.entry
        auth = None
        if entry.auth_kind == "oauth":
            redirect = self._callbacks.redirect_uri_or_placeholder
            auth = ServerAuth(entry.url, self._grant(state), redirect_uri=redirect, clock=self._clock)
        grant = entry.oauth.secrets if entry.oauth is not None else frozenset()
        return Endpoint(
            server=entry.name,
            url=entry.url,
            transport=entry.transport,
            headers=entry.headers,
            url_secrets=entry.secrets - set(entry.headers.values()) - grant,
            auth=auth,
        )

    async def _connect(self, state: ServerState, *, after_login: bool = False) -> None:
        """Connect ``state``'s server; ``after_login``: the first connect with the owner's new login."""
        attempt = state.attempt
        name = state.entry.name
        connection: Connection | None = None
        endpoint: Endpoint | None = None
        # The boundary covers every step, binding included: this runs in the task group every
        # chat of the host shares, and an exception escaping it would end them all.
        try:
            if state.entry.auth_kind == "oauth" and not self._grant(state).grant.authorized:
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
            adopted = self._hold_instructions(state, connection.instructions, self._bind(state, connection))
            state.connection, state.status, state.reason = connection, "connected", None
            state.transport, state.protocol = connection.transport, connection.protocol
            state.failures, state.next_retry, state.needs_login = 0, None, False
            state.refused_logins = 0
            if state.superseded is not None and state.entry.auth_kind != "oauth":
                # It replaced an OAuth entry and needs no login: the old tokens are abandoned.
                self._tg.start_soon(self._revoke_abandoned, name, state.superseded)
                state.superseded = None
            await self._settle(state, adopted)
        except RemoteError as exc:
            if self.servers.get(name) is state:
                if endpoint is not None and endpoint.auth is not None and endpoint.auth.scope:
                    state.scope = endpoint.auth.scope
                refused = isinstance(exc, AccessRefused)
                if refused and after_login:
                    state.refused_logins += 1
                self._failed(state, exc.reason, needs_login=isinstance(exc, NeedsLogin), refused=refused)
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
        self, state: ServerState, reason: str, *, needs_login: bool = False, refused: bool = False
    ) -> None:
        """``refused``: the server refused a login's token for the scopes it granted (``AccessRefused``)."""
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
            reason = f"{_login_hint(reason, state.entry.name)} to log in again"
        elif needs_login:
            # A timer cannot log in: the server waits for the owner.
            reason = _login_hint(reason, state.entry.name)
        state.reason = self.redactor.redact(reason)
        state.next_retry = None if needs_login else self._clock() + self._settings.backoff(state.failures)
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
            due = state.next_retry is not None and state.next_retry <= now
            if state.status == "unavailable" and not state.connecting and due:
                self._start(state)
        await self.wait_for_connects()
        self._write_section()

    async def _pick_up(self, entry: ServerEntry, *, superseded: OAuthGrant | None = None) -> ServerState:
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
        if state.attempt is not None:
            with anyio.move_on_after(self._settings.connection.connect_timeout + CONNECT_WAIT_MARGIN):
                await state.attempt.wait()
        self._write_section()
        return state

    async def start_login(
        self,
        name: str,
        *,
        owner: str,
        send_link: Callable[[str], Awaitable[object]],
        report: Callable[[str], Awaitable[object]],
    ) -> LoginStart:
        """Begin the owner's login to ``name``; return once its link is sent, or the login ended before.

        The link goes to ``send_link`` (the owner only). Once it is out, the login goes on in the
        background, the chat goes on meanwhile, and how the login ended goes to ``report``. A
        login that ends before its link is out (discovery or registration refused, no private
        chat) says why in the ``LoginStart`` returned instead. Preparing a link is bounded;
        beyond that the caller is told it is slow, and the outcome goes to ``report`` too. A
        login already in flight for the server is cancelled: only the newest link works.
        """
        state = self.servers[name]
        if state.login is not None:
            state.login.cancel()
        scope = state.login = anyio.CancelScope()
        start = LoginStart()
        self._tg.start_soon(self._login, state, scope, start, owner, send_link, report)
        with anyio.move_on_after(self._settings.connection.connect_timeout + CONNECT_WAIT_MARGIN):
            await start.settled.wait()
        # Nothing can settle it between the wait and this line: the outcome goes to ``report`` now.
        start.waiting = False
        return start

    async def _login(
        self,
        state: ServerState,
        scope: anyio.CancelScope,
        start: LoginStart,
        owner: str,
        send_link: Callable[[str], Awaitable[object]],
        report: Callable[[str], Awaitable[object]],
    ) -> None:
        name, url = state.entry.name, state.entry.url
        message: str
        to_owner = False  # the outcome goes where the link went (``send_link``), not to ``report``
        login: PendingLogin | None = None
        auth: ServerAuth | None = None
        # The grants this login replaces: revoked once its own is sealed (``stored``), never before.
        superseded = [state.superseded] if state.superseded is not None else []
        stored = False

        async def persist(grant: OAuthGrant) -> None:
            nonlocal stored
            if grant.authorized:
                # As held now: a connection may have refreshed its tokens while the owner logged in.
                held = state.grant.grant if state.grant is not None else state.entry.oauth
                if held is not None and held.authorized and held.tokens != grant.tokens:
                    superseded.append(held)
            stored = await self._login_done(state, grant) or stored

        with scope:
            # The boundary: this runs in the task group every chat of the host shares.
            try:
                redirect_uri = await self._callbacks.ensure_started(self._tg)

                timeout = self._settings.login_timeout

                async def deliver(link: str) -> None:
                    text = f"Log in to {name} within {duration_text(timeout)}:\n{link}"
                    if not self._callbacks.public:
                        # The redirect goes to this host's loopback: a browser elsewhere cannot reach it.
                        text += (
                            "\nIf the page you end at does not load, copy its address and send "
                            f"/mcp_auth {name} --paste in the chat you started from."
                        )
                    if await send_link(text) is None:
                        raise _Undelivered
                    start.sent = True
                    start.settled.set()

                login = PendingLogin(
                    self.session.scope, owner, name, deliver, self._callbacks, timeout=timeout
                )
                previous = self._grant(state).grant
                client = previous.client
                if (
                    client is not None
                    and client.redirect_uris
                    and redirect_uri not in {str(uri) for uri in client.redirect_uris}
                ):
                    client = None  # registered for another redirect address: register again
                if (
                    client is not None
                    and client.scope is not None
                    and state.scope is not None
                    and not set(state.scope.split()) <= set(client.scope.split())
                ):
                    client = None  # registered for fewer scopes than a step-up asks for
                storage = GrantStorage(
                    OAuthGrant(resource=previous.resource, issuer=previous.issuer, client=client),
                    persist,
                    clock=self._clock,
                )
                auth = ServerAuth(
                    url,
                    storage,
                    redirect_uri=redirect_uri,
                    login=login,
                    client_metadata_url=self._settings.oauth_client_metadata_url,
                    scope=state.scope,
                    clock=self._clock,
                )
                # Any request starts the flow on its 401; ping opens no session to clean up.
                http = await self._connector.login_client(auth)
                async with (
                    http,
                    http.stream(
                        "POST",
                        url,
                        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={
                            "Accept": "application/json, text/event-stream",
                            "MCP-Protocol-Version": "2025-11-25",
                        },
                    ),
                ):
                    pass
                if not storage.grant.authorized:
                    message = f"{name} did not ask for a login: it answered without one."
                    state.grant = storage
                else:
                    message = ""
            except LoginExpired as exc:
                message = f"{exc}. Run /mcp_auth {name} for a new link."
                # Told where the link went: the owner alone (a group learns nothing of the link).
                to_owner = start.sent
            except _Undelivered:
                message = (
                    f"I could not send you the login link for {name} privately. Start a private "
                    f"chat with me first, then run /mcp_auth {name} again."
                )
            except (OAuthFlowError, OAuthTokenError, OAuthRegistrationError) as exc:
                why = login.refusal if login is not None and login.refusal else str(exc)
                message = f"The login to {name} failed: {self.redactor.redact(why)[:300]}"
                if auth is not None and auth.found_no_metadata:
                    # A bare Bearer challenge can mean a fixed token as well as a 2025-03-26
                    # OAuth server: with no metadata anywhere, the owner may know which.
                    message += (
                        f". It publishes no OAuth metadata: if it takes a fixed token, add it "
                        f"again with /mcp_add {name} <url> --bearer"
                    )
            except Exception as exc:  # boundary: one login's failure must not end the chat's task group
                logger.warning(
                    "the login to %s in %s failed: %s", name, self.session.scope, type(exc).__name__
                )
                message = (
                    f"The login to {name} failed ({type(exc).__name__}). Run /mcp_auth {name} to try again."
                )
        if state.login is scope:
            state.login = None
        if scope.cancel_called:
            if not start.settled.is_set():
                start.why = f"A newer /mcp_auth {name} replaced this login."
                start.settled.set()
            return
        if not start.sent and start.waiting:
            # Ended before its link went out: the owner's command, still waiting, says why.
            start.why = self.redactor.redact(message)
            start.settled.set()
            return
        if to_owner and await send_link(self.redactor.redact(message)) is not None:
            return
        if not message:
            if self.servers.get(name) is not state:
                return
            state.scope = None  # asked for and granted: the token's scope holds it now
            note = ""
            if stored and superseded:
                # The new grant is sealed: the ones it replaces go. The connection that holds
                # the old tokens goes first; the connect below uses the new ones.
                if (old := state.connection) is not None:
                    state.connection = None
                    self._tg.start_soon(old.aclose)
                note = await self._revoke_superseded(name, superseded)
                state.superseded = None
            self._start(state, after_login=True)
            if state.attempt is not None:
                with anyio.move_on_after(self._settings.connection.connect_timeout + CONNECT_WAIT_MARGIN):
                    await state.attempt.wait()
            self._write_section()
            message = f"Logged in to {name}: {state_text(state, self._clock())}.{note}"
            if superseded and stored and (state.reason or "").startswith("authorization expired"):
                # RFC 7009 2.1: revoking a refresh token may end every token of its grant, and an
                # authorization server may have issued the new tokens under the same grant.
                message += (
                    " Its authorization server ended this login's tokens with the previous ones, "
                    f"which Playa revoked: run /mcp_auth {name} once more."
                )
        await report(self.redactor.redact(message))

    async def _login_done(self, state: ServerState, grant: OAuthGrant) -> bool:
        """A login's grant changed (registered, tokens received); returns whether it was sealed.

        Only a grant with tokens becomes the server's: until then the server keeps the one it
        has, so a login that fails or expires leaves the old tokens working.
        """
        if not grant.authorized:
            self._remember(grant.secrets)  # a registration's client secret
            return False
        if state.grant is None:
            state.grant = GrantStorage(
                grant, lambda new: self._save_grant(state.entry.name, new), clock=self._clock
            )
        else:
            state.grant.grant = grant
        return await self._save_grant(state.entry.name, grant)

    async def _revoke_superseded(self, name: str, grants: list[OAuthGrant]) -> str:
        """Revoke the grants a new one replaced (RFC 7009); "" or a note for the owner when it failed."""
        notes: list[str] = []
        for grant in grants:
            revoked = await self._revoke(grant)
            logger.info("the replaced tokens of %s in %s: %s", name, self.session.scope, revoked.outcome)
            if revoked.outcome == "failed":
                notes.append(
                    f" The previous login's tokens could not be revoked ({revoked.why}): they stay "
                    "valid until they expire, or until you revoke Playa's access at the authorization server."
                )
        return "".join(dict.fromkeys(notes))

    async def _revoke_abandoned(self, name: str, grant: OAuthGrant) -> None:
        """Revoke the grant of an OAuth entry replaced by one that needs no login, once that connected."""
        try:
            await self._revoke_superseded(name, [grant])
        except Exception as exc:  # boundary: this runs in the task group every chat of the host shares
            logger.warning("revoking the replaced tokens of %s failed: %s", name, type(exc).__name__)

    @property
    def login_timeout(self) -> float:
        """Seconds an authorization link stays usable."""
        return self._settings.login_timeout

    @property
    def redirect_uri(self) -> str | None:
        """Where the authorization server sends the owner's browser; None before any login began."""
        try:
            return self._callbacks.redirect_uri
        except RuntimeError:
            return None

    def paste_login(self, query: str, *, owner: str) -> str:
        """Complete a login with the query of the address the owner pasted; returns what to tell them.

        Checked as the redirect listener checks a request (state known, unused, unexpired; the
        authorization server's ``iss`` by the SDK), and bound to this chat and this owner.
        """
        return self._callbacks.complete(query, scope=self.session.scope, owner=owner)

    def _held_grant(self, name: str) -> OAuthGrant | None:
        """The OAuth grant ``name`` holds now, refreshed tokens included; None for a header server."""
        state = self.servers.get(name)
        if state is None:
            return None
        return state.grant.grant if state.grant is not None else state.entry.oauth

    async def _revoke(self, grant: OAuthGrant) -> Revocation:
        """Revoke a removed server's tokens (RFC 7009), bounded in time; never raises for the server's failure."""
        async with await self._connector.login_client() as http:
            return await revoke(grant, http)

    async def _file_changed(self) -> None:
        """After ``remove`` or ``restore`` changed the file."""
        await self.reconcile()
        self._write_section()

    # The owner's actions: one call each, from the file to the connections and the prompt

    def url_refusal(self, url: str) -> str | None:
        """Why this host will not connect to ``url`` (its egress policy), or None when it will."""
        return self._connector.settings.egress.url_refusal(url)

    async def add(self, entry: ServerEntry) -> tuple[Saved, ServerState]:
        """Save ``entry`` (a new server, or one that replaces its namesake) and wait for its connect.

        Raises ``StoreError`` when the file cannot take it; nothing changed then.
        """
        previous = self.servers.get(entry.name)
        superseded = self._held_grant(entry.name)
        if superseded is None or not superseded.authorized:
            superseded = previous.superseded if previous is not None else None
        saved = await anyio.to_thread.run_sync(self._file().put, entry)
        return saved, await self._pick_up(entry, superseded=superseded)

    async def add_for_login(self, entry: ServerEntry) -> tuple[Saved, ServerState]:
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
        grant = self._held_grant(name)
        saved = await anyio.to_thread.run_sync(self._file().remove, name)
        await self._file_changed()
        revoked = Revocation("nothing")
        if saved.changed and grant is not None:
            revoked = await self._revoke(grant)
        if saved.changed and state is not None and state.superseded is not None:
            # The grant of an entry this one replaced, whose new login never came.
            await self._revoke_superseded(name, [state.superseded])
        return saved, tools, revoked

    async def restore(self) -> Saved:
        """Put back the copy of the file Playa saved last (``/mcp_restore``), and pick it up.

        Raises ``StoreError`` when there is none to trust; nothing changed then.
        """
        saved = await anyio.to_thread.run_sync(self._file().restore)
        await self._file_changed()
        return saved

    def _file(self) -> ServerStore:
        if self.store is None:
            raise UsageError("Remote MCP is disabled: this host has no secret to seal servers with.")
        return self.store

    # Tools

    def _bind(self, state: ServerState, connection: Connection) -> Pins | None:
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
        digests = {remote: field_digests(tool) for remote, tool in allowed.items()}
        pins, adopted = entry.pins, None
        if pins is None:
            pins = adopted = Pins(digests)
        verdicts = {remote: pins.verdict(tool, digests[remote]) for remote, tool in allowed.items()}
        # A changed definition is not the tool the owner approved: until they decide, the model
        # gets neither the new text nor the old one (the server would run the new tool).
        state.held = {remote: tool for remote, tool in allowed.items() if verdicts[remote] == "held"}
        allowed = {remote: tool for remote, tool in allowed.items() if verdicts[remote] == "live"}
        state.approved.update(allowed)
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
        return adopted

    def _hold_instructions(self, state: ServerState, text: str | None, adopted: Pins | None) -> Pins | None:
        """Give the model the server's instructions as approved; hold changed ones for the owner.

        Pins from before instructions were pinned adopt these (returned with ``adopted``, to save).
        """
        pins = adopted if adopted is not None else state.entry.pins or Pins()
        if pins.instructions is None:
            pins = adopted = pins.approve_instructions(text, self.redactor.redact)
        verdict = pins.instructions_verdict(text)
        state.held_instructions = text if verdict == "held" else None
        # Until the owner decides, the model keeps what they approved (or nothing).
        state.instructions = text if verdict == "live" else pins.instructions_text
        return adopted

    async def _tools_changed(self, state: ServerState, connection: Connection) -> None:
        """The server said its tool list changed, and the connection listed it again."""
        if self.servers.get(state.entry.name) is not state or state.connection is not connection:
            return  # dropped or replaced meanwhile; a new connection lists its own tools
        adopted = self._bind(state, connection)
        await self._settle(state, adopted)
        self._write_section()

    async def _settle(self, state: ServerState, adopted: Pins | None) -> None:
        """After a bind: save an adopted list, and tell the owner of tools that wait for them."""
        name = state.entry.name
        if adopted is not None:
            tools_too = state.entry.pins is None
            try:
                await self._save_pins(state, adopted)
            except StoreError as exc:
                # Held in memory meanwhile; the next connect adopts and tries to save again.
                logger.warning("could not save the tool pins of %s in %s: %s", name, self.session.scope, exc)
            else:
                if not state.quiet_adopt:
                    await self._tell_adopted(name, adopted, tools_too=tools_too)
        state.quiet_adopt = False
        if state.waiting and self._pending(state) != state.shown:
            await self._announce(state)

    async def _tell_adopted(self, name: str, pins: Pins, *, tools_too: bool) -> None:
        """Tell the owner that an entry from before pins took what its server offers now as approved."""
        instructions = pins.instructions_text is not None
        if tools_too:
            count = len(pins.tools)
            what = f"{count} tool{'' if count == 1 else 's'}" + (
                " and its instructions" if instructions else ""
            )
            await self._tell(
                f"{name} was saved before Playa pinned tool definitions: its current {what} are "
                "pinned now, and a change to any of them will wait for your approval."
            )
        elif instructions:
            await self._tell(
                f"{name} was saved before Playa pinned server instructions: its current instructions "
                "are pinned now, and a change to them will wait for your approval."
            )

    async def _save_pins(self, state: ServerState, pins: Pins) -> None:
        """Seal new pins into the server's entry (an owner's decision, or an adopted list)."""
        entry = replace(state.entry, pins=pins)
        state.entry = entry
        if self.store is not None and self.servers.get(entry.name) is state:
            await anyio.to_thread.run_sync(self.store.put, entry)

    def approval(self, state: ServerState) -> Approval | None:
        """What the owner is shown of the server's held tools and instructions (redacted, cut), or None when none wait."""
        if not state.waiting:
            return None
        name = state.entry.name
        pins = state.entry.pins or Pins()
        redact = self.redactor.redact
        changes = tuple(
            change_of(tool, pins.tools.get(remote), state.approved.get(remote), redact)
            for remote, tool in sorted(state.held.items())
        )
        instructions: tuple[str, ...] = ()
        note = f"Meanwhile the agent uses its other tools; /mcp_review {name} shows this again."
        if state.held_instructions is not None:
            instructions = instructions_change(pins.instructions_text, state.held_instructions, redact)
            kept = "the instructions you approved" if pins.instructions_text else "no instructions from it"
            note = f"Meanwhile the agent uses its other tools and gets {kept}; /mcp_review {name} shows this again."
        return Approval(
            source=f"The remote MCP server {name}",
            changes=changes,
            approve=f"/mcp_approve {name}",
            reject=f"/mcp_reject {name}",
            note=note,
            instructions=instructions,
            digest=self._pending(state) or "",
        )

    def _pending(self, state: ServerState) -> str | None:
        """The digest of what waits for the owner now (None: nothing)."""
        return pending_digest(state.held.values(), state.held_instructions) if state.waiting else None

    def mark_shown(self, state: ServerState) -> None:
        """The owner has now seen the server's held tools and instructions as they are (a review, an announcement)."""
        state.shown = self._pending(state)

    async def _announce(self, state: ServerState) -> None:
        approval = self.approval(state)
        ui = self.owner_ui
        if approval is None:
            return
        if ui is None:
            # No front end of the owner's known yet (after a restart): they hear it with their
            # next command, and /mcp_list says so meanwhile.
            logger.info("%s: tool changes of %s wait for the owner", self.session.scope, state.entry.name)
            return
        now = self._clock()
        if state.announced is not None and now - state.announced < self._settings.approval_interval:
            # The owner has an undecided message about this server: a server that changes
            # again and again gets no more of their attention than one message per interval.
            # The newest state waits for the next message, /mcp_review, or the decision.
            logger.debug("%s: a further change of %s waits silently", self.session.scope, state.entry.name)
            return
        state.announced = now
        self.mark_shown(state)
        try:
            await ui.approval(approval)
        except Exception as exc:  # boundary: a front end's failure must not stop the server's tools
            state.announced = None  # not shown: the next change may try again
            logger.warning(
                "could not show the owner the tool changes of %s: %s", state.entry.name, type(exc).__name__
            )

    async def _tell(self, text: str) -> None:
        ui = self.owner_ui
        if ui is None:
            self._untold.append(text)
            return
        try:
            await ui.send(self.redactor.redact(text))
        except Exception as exc:  # boundary: a front end's failure must not stop the server's tools
            logger.warning("could not tell the owner of %s: %s", self.session.scope, type(exc).__name__)

    async def owner_seen(self, ui: UI, *, announce: bool = True) -> None:
        """The owner ran a command through ``ui``: tell them what waited for them, and remember it.

        With ``announce`` False, held tools are not shown (the command shows them itself).
        """
        self.owner_ui = ui
        untold, self._untold = self._untold, []
        for text in untold:
            await self._tell(text)
        if not announce:
            return
        for state in list(self.servers.values()):
            if state.waiting and self._pending(state) != state.shown:
                await self._announce(state)

    async def decide(self, name: str, *, approve: bool, digest: str | None = None) -> str:
        """The owner's ``/mcp_approve`` or ``/mcp_reject``: of exactly the held tools they were shown.

        ``digest`` names what was shown (an ``Approval``'s); without it, what this chat showed last.
        """
        await self.wait_for_connects()  # a server reconnecting (a restart, a group's upgrade) lists its tools
        state = self.servers.get(name)
        if state is None:
            return f"No remote MCP server is named {name} any more."
        if not state.waiting:
            return f"No tool changes of {name} wait for a decision."
        if self._pending(state) != (state.shown if digest is None else digest):
            # A server that changes again between the review and the decision must not get its
            # newest text approved unseen.
            if digest is not None and self.owner_ui is not None:
                # A button of an older message: the newest state comes as a message of its own,
                # with its own buttons, now (the owner asked: the bounded stream does not apply).
                state.announced = None
                await self._announce(state)
                return (
                    f"The tools of {name} changed again since that message was shown, so nothing was "
                    "decided: a new message shows them as they are now."
                )
            self.mark_shown(state)
            approval = self.approval(state)
            assert approval is not None
            return f"The tools of {name} changed again since you were shown them. Now:\n{render_approval(approval)}"
        held = list(state.held.values())
        instructions = state.held_instructions
        pins = state.entry.pins or Pins()
        pins = pins.approve(held) if approve else pins.reject(held)
        if instructions is not None:
            if approve:
                pins = pins.approve_instructions(instructions, self.redactor.redact)
            else:
                pins = pins.reject_instructions(instructions)
        connection = state.connection
        if connection is not None:
            # Pins of tools the server dropped go: they would only grow with every change.
            pins = pins.only(tool.name for tool in connection.tools)
        await self._save_pins(state, pins)
        if connection is not None and not connection.broken:
            self._hold_instructions(state, connection.instructions, self._bind(state, connection))
        else:
            # The next connect binds what the pins now allow.
            state.held, state.held_instructions = {}, None
            state.instructions = pins.instructions_text
        state.shown = state.announced = None
        self._write_section()
        return self.redactor.redact(_decided(name, held, instructions is not None, approve=approve))

    def _shown(self, name: str) -> str:
        """A server's tool name fit to show: redacted, then cut."""
        shown = self.redactor.redact(name)
        return shown if len(shown) <= 40 else shown[:39] + "…"

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

    def _redact_out(self, text: str) -> str:
        """Text this extension shows the chat itself: its own credentials and the host's removed."""
        text = self.redactor.redact(text)
        return self.session.redact(text) if self.session.redact is not None else text

    async def _call(
        self, state: ServerState, exposed: str, remote: str, arguments: dict[str, Any]
    ) -> ToolResult:
        connection = await self._connection_for_call(state)
        ui = self.session.turn_ui
        feed = ProgressFeed(ui, exposed, self._redact_out) if ui is not None else None
        if feed is not None:
            # In the chat's task group: the front end may take its time, the call never waits for it.
            self._tg.start_soon(feed.run)
        final = "failed"
        try:
            result = await connection.call_tool(
                remote,
                arguments,
                timeout=self._settings.connection.call_timeout,
                on_progress=feed.report if feed is not None else None,
            )
            final = "still running" if isinstance(result, PendingTask) else "done"
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
        except NeedsLogin as exc:
            # The token lacks a scope the call needs: the server waits for the owner's login.
            if state.connection is connection:
                state.connection = None
                self._tg.start_soon(connection.aclose)
            auth = connection.endpoint.auth
            if auth is not None and auth.scope:
                state.scope = auth.scope
            self._failed(state, exc.reason, needs_login=True)
            self._write_section()
            return ToolResult.error(f"{exposed} failed: {state.reason}")
        except RemoteError as exc:
            # The server answered with an error: the connection is fine and stays.
            return ToolResult.error(f"{exposed} failed: {exc.reason}")
        finally:
            if feed is not None:
                feed.close(final)
        if isinstance(result, PendingTask):
            return self._follow_later(connection, exposed, arguments, result, ui)
        # Not cut here: the host's model-bound gate redacts first, then cuts.
        return map_result(result)

    def _follow_later(
        self,
        connection: Connection,
        exposed: str,
        arguments: dict[str, Any],
        pending: PendingTask,
        ui: UI | None,
    ) -> ToolResult:
        """A task outlived its call: follow it in the background; its result comes to the chat later."""
        call_max = self._settings.connection.call_max
        if ui is None or self.session.deliver_late is None:
            return ToolResult.error(
                f"{exposed} is still running on its server (task {pending.label}), and its result "
                "cannot be brought to this chat later"
            )
        self._tg.start_soon(self._finish_task, connection, exposed, arguments, pending, ui)
        return ToolResult(
            f"{exposed} is still running on its server as a task (task {pending.label}, last state: "
            f"{pending.task.status}). Its result will be posted to the chat when it is done (at most "
            f"{call_max:g} s after the call began), and you will see it then."
        )

    async def _finish_task(
        self, connection: Connection, exposed: str, arguments: dict[str, Any], pending: PendingTask, ui: UI
    ) -> None:
        feed = ProgressFeed(ui, exposed, self._redact_out)
        note = f"The task of {exposed} (task {pending.label}), still running when its turn ended,"
        # The boundary: this runs in the task group every chat of the host shares.
        async with anyio.create_task_group() as tg:
            tg.start_soon(feed.run)
            try:
                result = map_result(await connection.finish_task(pending, on_progress=feed.report))
                note += " has finished."
            except RemoteError as exc:
                result = ToolResult.error(f"{exposed} failed: {exc.reason}")
                note += " did not finish."
            except Exception as exc:  # boundary: one task's failure must not end the chat's task group
                logger.error("following a task in %s failed: %s", self.session.scope, type(exc).__name__)
                result = ToolResult.error(f"{exposed} failed: internal error ({type(exc).__name__})")
                note += " could not be followed."
            finally:
                feed.close("done" if note.endswith(" has finished.") else "failed")
        deliver = self.session.deliver_late
        if deliver is None:
            return
        try:
            await deliver(LateResult(tool_name=exposed, arguments=arguments, result=result, ui=ui, note=note))
        except Exception as exc:  # boundary: the chat may be gone; nothing else depends on this
            logger.warning(
                "a late result in %s was not delivered: %s", self.session.scope, type(exc).__name__
            )

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

    def _write_section(self) -> None:
        self.session.prompt.set(SECTION_TITLE, section(self))

    async def close(self) -> None:
        """Close every connection at once; each close is bounded by the close timeout."""
        connections = [connection for name in list(self.servers) if (connection := self._drop(name))]
        try:
            async with anyio.create_task_group() as tg:
                for connection in connections:
                    tg.start_soon(connection.aclose)
        finally:
            # Nothing of this chat's is left to log its credentials.
            outbound_secrets().release(self)
