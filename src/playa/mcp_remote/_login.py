"""The owner's OAuth logins to a chat's servers, and the grants they leave.

A login runs in the background once its link is out; its grant is sealed into the server's
entry before it is used, and the grants it replaces are revoked (RFC 7009) only once it is.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from functools import partial
from typing import Final
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.shared.auth import OAuthClientInformationFull

from ._callback_listener import PendingLogin, duration_text
from ._server import ChatContext, LoginOwner, LoginStart, RemoteServer
from ._views import state_text
from .store import OAuthGrant
from .transport import (
    OAUTH_ERROR_CODES,
    GrantStorage,
    LoginEnded,
    LoginExpired,
    ServerAuth,
)

__all__ = ["Logins", "failure_words"]

logger = logging.getLogger(__name__)


class _Undelivered(LoginEnded):
    """The owner could not be sent the authorization link privately (no private chat with the bot)."""


_ERROR_FIELD: Final = re.compile(r'"error"\s*:\s*"([a-z_]{1,40})"')


def failure_words(exc: Exception, refusal: str | None) -> str:
    """Why a login failed, in Playa's fixed words: a server's error code only from the RFCs' list."""
    if refusal is not None:
        code = refusal.partition(":")[0]
        return code if code in OAUTH_ERROR_CODES else "the authorization server refused the login"
    if isinstance(exc, OAuthRegistrationError):
        return "the authorization server refused to register Playa as a client"
    if isinstance(exc, OAuthTokenError):
        found = _ERROR_FIELD.search(str(exc))
        named = found.group(1) if found is not None and found.group(1) in OAUTH_ERROR_CODES else None
        return "the authorization server refused to issue tokens" + (f" ({named})" if named else "")
    return "the authorization server's answer could not be used"


def _reusable_client(
    previous: OAuthGrant, redirect_uri: str, scope: str | None
) -> OAuthClientInformationFull | None:
    """The client registration a new login may use again: None when it must register anew."""
    client = previous.client
    if (
        client is not None
        and client.redirect_uris
        and redirect_uri not in {str(uri) for uri in client.redirect_uris}
    ):
        return None  # registered for another redirect address: register again
    if (
        client is not None
        and client.scope is not None
        and scope is not None
        and not set(scope.split()) <= set(client.scope.split())
    ):
        return None  # registered for fewer scopes than a step-up asks for
    return client


@dataclass(eq=False)
class _Attempt:
    """One login to one server as it goes: where its link goes, and what came of it."""

    server: RemoteServer
    start: LoginStart
    owner: LoginOwner
    superseded: list[OAuthGrant]
    """The grants this login replaces: revoked once its own is sealed (``stored``), never before."""
    stored: bool = False
    pending: PendingLogin | None = None
    auth: ServerAuth | None = None
    message: str = ""
    """How it ended, for the owner ("" when it succeeded)."""
    details: str | None = None
    """What the authorization server said of a refusal: for the owner alone."""
    to_owner: bool = False
    """The outcome goes where the link went (the owner's ``send_link``), not to ``report``."""

    def refused(self, exc: Exception) -> None:
        """The authorization server refused the login: why, in Playa's words and (for the owner) its own."""
        name = self.server.entry.name
        refusal = self.pending.refusal if self.pending is not None else None
        self.message = f"The login to {name} failed: {failure_words(exc, refusal)}"
        if self.auth is not None and self.auth.found_no_metadata:
            # A bare Bearer challenge can mean a fixed token as well as a 2025-03-26
            # OAuth server: with no metadata anywhere, the owner may know which.
            self.message += (
                f". It publishes no OAuth metadata: if it takes a fixed token, add it "
                f"again with /mcp_add {name} <url> --bearer"
            )
        else:
            self.message += "."
            # The server's own words (an error body, a description) may echo the code
            # or an instruction: the owner alone sees them, redacted and cut.
            said = refusal or str(exc)
            self.details = f"What the authorization server said of the login to {name}: {said}"


@dataclass(frozen=True)
class _StepUp:
    """The owner was asked to log in with ``scopes``: by ``login``, whose link is valid until ``until``."""

    scopes: frozenset[str]
    login: anyio.CancelScope
    until: float
    """On the event loop's clock."""
    sent: bool = True
    """False once the login ended before its link went out (the owner was told why)."""


class Logins:
    """The owner's OAuth logins to one chat's servers: each server's login is its ``ServerLogin``."""

    def __init__(self, context: ChatContext) -> None:
        self._session = context.session
        self._servers = context.servers
        self._connector = context.connector
        self._callbacks = context.callbacks
        self._settings = context.settings
        self._tg = context.task_group
        self._clock = context.clock
        self._secrets = context.secrets
        self._redact = context.secrets.redact
        self._revoker = context.revoker
        self._audit = context.audit
        self._step_ups: dict[str, _StepUp] = {}
        """Per server, the last step-up the owner was asked for."""

    async def start(self, name: str, owner: LoginOwner) -> LoginStart:
        """Begin the owner's login to ``name``; return once its link is sent, or the login ended before.

        The link goes to ``owner.send_link`` (the owner only). Once it is out, the login goes on in
        the background, the chat goes on meanwhile, and how the login ended goes to ``report``. A
        login that ends before its link is out (discovery or registration refused, no private
        chat) says why in the ``LoginStart`` returned instead. Preparing a link is bounded;
        beyond that the caller is told it is slow, and the outcome goes to ``report`` too. A
        login already in flight for the server is cancelled: only the newest link works.
        """
        _, start = self._begin(self._servers[name], owner)
        return await self._link_out(start)

    def _begin(self, state: RemoteServer, owner: LoginOwner) -> tuple[anyio.CancelScope, LoginStart]:
        """Start a login in the background (replacing one in flight); nothing awaited."""
        scope = state.login.begin()
        start = LoginStart()
        self._tg.start_soon(self._login, state, scope, start, owner)
        return scope, start

    async def _link_out(self, start: LoginStart) -> LoginStart:
        """Wait (bounded) until the login's link is out, or the login ended before."""
        with anyio.move_on_after(self._settings.connect_wait):
            await start.settled.wait()
        # Nothing can settle it between the wait and this line: the outcome goes to ``report`` now.
        start.waiting = False
        return start

    async def step_up(self, state: RemoteServer, owner: LoginOwner) -> bool:
        """A call was refused for want of a scope (403 ``insufficient_scope``): ask the owner to log in.

        The link for the scopes ``state.login.scope`` names goes to ``owner.send_link`` (them alone), as
        the first login's did; at most once per scope while a link for it is in use: calls that
        are refused meanwhile send none. Returns whether the owner was asked (now or before).
        """
        wanted = frozenset((state.login.scope or "").split())
        asked = self._step_ups.get(state.entry.name)
        if (
            asked is not None
            and wanted <= asked.scopes
            and (asked.login is state.login.flight or anyio.current_time() < asked.until)
        ):
            # A link for these scopes is out (or on its way) and still valid; or the owner was
            # told why none could be sent: a refused call is no reason to ask again.
            return asked.sent
        login, start = self._begin(state, owner)
        record = _StepUp(wanted, login, anyio.current_time() + self._settings.login_timeout)
        self._step_ups[state.entry.name] = record
        await self._link_out(start)
        if start.why is not None:
            # Ended before its link went out: nobody's command waits to say why; the owner hears it.
            self._step_ups[state.entry.name] = replace(record, sent=False)
            await owner.send_link(start.why)
            return False
        return True

    async def _login(
        self,
        state: RemoteServer,
        scope: anyio.CancelScope,
        start: LoginStart,
        owner: LoginOwner,
    ) -> None:
        """One login, in the chat's task group: its link out, its grant sealed, the server reconnected."""
        name = state.entry.name
        # The grants this login replaces: revoked once its own is sealed (``stored``), never before.
        superseded = [state.login.superseded] if state.login.superseded is not None else []
        attempt = _Attempt(state, start, owner, superseded)
        with scope:
            # The boundary: this runs in the task group every chat of the host shares.
            try:
                await self._authorize(attempt)
            except LoginExpired as exc:
                attempt.message = f"{exc}. Run /mcp_auth {name} for a new link."
                # Told where the link went: the owner alone (a group learns nothing of the link).
                attempt.to_owner = start.sent
            except _Undelivered:
                attempt.message = (
                    f"I could not send you the login link for {name} privately. Start a private "
                    f"chat with me first, then run /mcp_auth {name} again."
                )
            except (OAuthFlowError, OAuthTokenError, OAuthRegistrationError) as exc:
                attempt.refused(exc)
            except Exception as exc:  # boundary: one login's failure must not end the chat's task group
                logger.warning(
                    "the login to %s in %s failed: %s", name, self._session.scope, type(exc).__name__
                )
                attempt.message = (
                    f"The login to {name} failed ({type(exc).__name__}). Run /mcp_auth {name} to try again."
                )
        state.login.ended(scope)
        if scope.cancel_called:
            if not start.settled.is_set():
                start.why = f"A newer /mcp_auth {name} replaced this login."
                start.settled.set()
            return
        await self._ended(attempt)

    async def _authorize(self, attempt: _Attempt) -> None:
        """The login's flow: the link out, the owner's consent awaited, the tokens received and sealed."""
        state, start = attempt.server, attempt.start
        name, url = state.entry.name, state.entry.url
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
            if await attempt.owner.send_link(text) is None:
                raise _Undelivered
            start.sent = True
            start.settled.set()

        attempt.pending = PendingLogin(
            self._session.scope,
            attempt.owner.id,
            name,
            deliver,
            self._callbacks,
            timeout=timeout,
            remember=self._secrets.remember,
        )
        previous = state.grant().grant
        storage = GrantStorage(
            OAuthGrant(
                resource=previous.resource,
                issuer=previous.issuer,
                client=_reusable_client(previous, redirect_uri, state.login.scope),
                elsewhere=previous.elsewhere,  # registrations with other issuers stay (SEP-2352)
            ),
            partial(self._persist, attempt),
            clock=self._clock,
        )
        attempt.auth = ServerAuth(
            url,
            storage,
            redirect_uri=redirect_uri,
            login=attempt.pending,
            client_metadata_url=self._settings.oauth_client_metadata_url,
            scope=state.login.scope,
            clock=self._clock,
        )
        # Any request starts the flow on its 401; ping opens no session to clean up.
        http = await self._connector.login_client(attempt.auth)
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
            attempt.message = f"{name} did not ask for a login: it answered without one."
            state.login.use(storage)

    async def _persist(self, attempt: _Attempt, grant: OAuthGrant) -> None:
        """The login's grant changed: sealed once it has tokens; the grant it replaces is noted."""
        state = attempt.server
        if grant.authorized:
            # As held now: a connection may have refreshed its tokens while the owner logged in.
            held = state.login.held(state.entry)
            if held is not None and held.authorized and held.tokens != grant.tokens:
                attempt.superseded.append(held)
        attempt.stored = await self._login_done(state, grant) or attempt.stored

    async def _ended(self, attempt: _Attempt) -> None:
        """Say how the login ended: to the owner's command still waiting, where the link went, or ``report``."""
        state, start, message = attempt.server, attempt.start, attempt.message
        self._audit.record("login_completed" if not message else "login_failed", server=state.entry.name)
        if attempt.details is not None:
            await attempt.owner.send_link(self._secrets.redact_out(attempt.details)[:400])
        if not start.sent and start.waiting:
            # Ended before its link went out: the owner's command, still waiting, says why.
            start.why = self._redact(message)
            start.settled.set()
            return
        if attempt.to_owner and await attempt.owner.send_link(self._redact(message)) is not None:
            return
        if not message:
            if not state.current:
                return
            message = await self._logged_in(attempt)
        await attempt.owner.report(self._redact(message))

    async def _logged_in(self, attempt: _Attempt) -> str:
        """The login succeeded: the grants it replaced revoked, the server reconnected; what to say."""
        state, superseded, stored = attempt.server, attempt.superseded, attempt.stored
        name = state.entry.name
        state.login.granted()  # asked for and granted: the token's scope holds it now
        note = ""
        if stored and superseded:
            # The new grant is sealed: the ones it replaces go. The connection that holds
            # the old tokens goes first; the connect below uses the new ones.
            if (old := state.take_connection()) is not None:
                self._tg.start_soon(old.aclose)
            note = await self._revoker.replaced(name, superseded)
            state.login.supersede(None)
        await state.reconnect()
        message = f"Logged in to {name}: {state_text(state, self._clock())}.{note}"
        if superseded and stored and (state.reason or "").startswith("authorization expired"):
            # RFC 7009 2.1: revoking a refresh token may end every token of its grant, and an
            # authorization server may have issued the new tokens under the same grant.
            message += (
                " Its authorization server ended this login's tokens with the previous ones, "
                f"which Playa revoked: run /mcp_auth {name} once more."
            )
        return message

    async def _login_done(self, state: RemoteServer, grant: OAuthGrant) -> bool:
        """A login's grant changed (registered, tokens received); returns whether it was sealed.

        Only a grant with tokens becomes the server's: until then the server keeps the one it
        has, so a login that fails or expires leaves the old tokens working.
        """
        if not grant.authorized:
            self._secrets.remember(grant.secrets)  # a registration's client secret
            return False
        state.login.received(grant, state.save_grant, self._clock)
        return await state.save_grant(grant)

    @property
    def timeout(self) -> float:
        """Seconds an authorization link stays usable."""
        return self._settings.login_timeout

    @property
    def redirect_uri(self) -> str | None:
        """Where the authorization server sends the owner's browser; None before any login began."""
        try:
            return self._callbacks.redirect_uri
        except RuntimeError:
            return None

    def paste(self, address: str, *, owner: str) -> str | None:
        """Complete a login with the address the owner pasted; returns what to tell them.

        None when ``address`` is not where this host's logins end (never quoted back: it may
        be anything, a key included). Checked as the redirect listener checks a request (state
        known, unused, unexpired; the authorization server's ``iss`` by the SDK), and bound to
        this chat and this owner.
        """
        redirect = self.redirect_uri
        given = urlsplit(address.strip())
        expected = urlsplit(redirect) if redirect is not None else None
        if expected is None or (given.scheme, given.netloc.lower(), given.path) != (
            expected.scheme,
            expected.netloc.lower(),
            expected.path,
        ):
            return None
        return self._callbacks.complete(given.query, scope=self._session.scope, owner=owner)

    def held_grant(self, name: str) -> OAuthGrant | None:
        """The OAuth grant ``name`` holds now, refreshed tokens included; None for a header server."""
        state = self._servers.get(name)
        return state.login.held(state.entry) if state is not None else None
