"""The login callback: the loopback HTTP listener the authorization server redirects to, and the logins it completes.

``Callbacks`` listens on ``http://127.0.0.1:<port>/oauth/callback`` (RFC 8252), or takes the
queries a front end's own listener hands it (``public_url``). Each ``PendingLogin`` is one
authorization link (the transport's ``LoginLink``), bound by its ``state`` to one chat and owner,
used once, and expired after ``LOGIN_TIMEOUT``. With a ``LoginRelay`` (several processes, one
database) a redirect may reach another process than the one whose login it is: it is handed on.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from anyio.abc import SocketStream, TaskGroup
from mcp.shared.auth import AuthorizationCodeResult

from ..exceptions import DatabaseError
from ._login_relay import UNDELIVERED, UNKNOWN, LoginRelay
from .transport import CALLBACK_PATH, OAUTH_ERROR_CODES, LoginExpired, register_secrets

__all__ = ["LOGIN_TIMEOUT", "Callbacks", "PendingLogin", "duration_text"]

LOGIN_TIMEOUT: Final = 600.0
"""Seconds an authorization link stays usable."""
_MAX_REQUEST: Final = 16 * 1024
_FORGET_TIMEOUT: Final = 10.0
"""Seconds an ended login waits for its row in the database to go."""

logger = logging.getLogger(__name__)


def _nowhere(values: frozenset[str]) -> None:
    """A login with no chat redactor to tell (the log gate is told all the same)."""


@dataclass(eq=False)
class PendingLogin:
    """One authorization link: which chat and owner it is for, until when, and its result."""

    scope: str
    owner: str
    server: str
    deliver: Callable[[str], Awaitable[None]]
    """Sends the link to the owner only (``UI.send_private``)."""
    callbacks: Callbacks
    timeout: float = LOGIN_TIMEOUT
    remember: Callable[[frozenset[str]], None] = field(default=_nowhere)
    """Tells the chat's redactor of the login's own secrets (its ``state``, the code, the PKCE
    verifier) the moment Playa knows them: a server that echoes one shows the chat nothing."""
    state: str | None = None
    deadline: float = math.inf
    _done: anyio.Event = field(default_factory=anyio.Event)
    _result: AuthorizationCodeResult | None = None
    refusal: str | None = None
    """The authorization server's ``error`` and ``error_description``, when it refused."""

    async def send_link(self, url: str) -> None:
        states = parse_qs(urlsplit(url).query).get("state", [])
        if len(states) != 1 or not states[0]:
            raise LoginExpired("the authorization link has no state")
        self.state = states[0]
        self.deadline = anyio.current_time() + self.timeout
        self.callbacks.pending[self.state] = self
        await self.callbacks.record(self)
        try:
            await self.deliver(url)
        except BaseException:
            # No link went out: nothing may complete this login, here or in another process.
            self.callbacks.pending.pop(self.state, None)
            with anyio.CancelScope(shield=True), anyio.move_on_after(_FORGET_TIMEOUT):
                await self.callbacks.forget(self.state)
            raise
        # A secret from here on: the link that carries it is out (redacted, it would not work),
        # and nobody but the owner's browser can learn it before they open it.
        self.known(self.state)

    async def result(self) -> AuthorizationCodeResult:
        try:
            with anyio.move_on_after(max(0.0, self.deadline - anyio.current_time())):
                await self._done.wait()
        finally:
            if self.state is not None:
                self.callbacks.pending.pop(self.state, None)
                with anyio.CancelScope(shield=True), anyio.move_on_after(_FORGET_TIMEOUT):
                    await self.callbacks.forget(self.state)
        if self._result is None:
            raise LoginExpired(
                f"The login link for {self.server} was not used within {duration_text(self.timeout)}"
            )
        return self._result

    def known(self, *values: str) -> None:
        """Secrets of this login, now known: to the log gate and the chat's redactor."""
        register_secrets(values)
        self.remember(frozenset(value for value in values if value))

    def complete(self, result: AuthorizationCodeResult) -> None:
        self._result = result
        self._done.set()

    @property
    def expired(self) -> bool:
        return anyio.current_time() > self.deadline


class Callbacks:
    """The redirect listener of a host, and the logins waiting on it.

    By default a loopback listener of its own. With ``public_url`` the redirect URI is
    ``<public_url>/oauth/callback``, served by the front end's own listener (Telegram's webhook),
    which hands each request's query to ``complete``.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, public_url: str | None = None) -> None:
        self._host = host
        self._port = port
        self.pending: dict[str, PendingLogin] = {}
        self._listening: anyio.Event | None = None
        self._url: str | None = None
        self.public = public_url is not None
        """The redirect URI is reachable from the owner's browser wherever it runs."""
        if public_url is not None:
            self._url = public_url.rstrip("/") + CALLBACK_PATH
        self.relay: LoginRelay | None = None
        """Where redirects meet their logins across processes (a database); None: this process only."""
        self._relaying = False

    @property
    def redirect_uri_or_placeholder(self) -> str:
        """The redirect URI if listening; a connection that never logs in needs only a well-formed one."""
        if self._url is not None:
            return self._url
        return f"http://{self._host}{f':{self._port}' if self._port else ''}{CALLBACK_PATH}"

    @property
    def redirect_uri(self) -> str:
        if self._url is None:
            raise RuntimeError("the OAuth callback listener is not running")
        return self._url

    async def ensure_started(self, task_group: TaskGroup) -> str:
        """Start listening (once) in ``task_group``; returns the redirect URI."""
        if self.relay is not None and not self._relaying:
            self._relaying = True
            await task_group.start(self.relay.serve, self.pending, self.complete)
        if self.public:
            return self.redirect_uri
        if self._listening is None:
            self._listening = anyio.Event()
            await task_group.start(self._serve)
        await self._listening.wait()
        return self.redirect_uri

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        listener = await anyio.create_tcp_listener(local_host=self._host, local_port=self._port)
        async with listener:
            port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
            self._url = f"http://{self._host}:{port}{CALLBACK_PATH}"
            assert self._listening is not None
            self._listening.set()
            task_status.started()
            await listener.serve(self._handle)

    async def record(self, login: PendingLogin) -> None:
        """A login's link goes out: recorded for the other processes, when there are any."""
        if self.relay is None:
            return
        try:
            await self.relay.record(login, self.relay.clock() + login.timeout)
        except DatabaseError as exc:
            # The login still completes if its redirect reaches this process.
            logger.warning(
                "the login to %s could not be recorded for the other processes: %s", login.server, exc
            )

    async def forget(self, state: str) -> None:
        """A login ended: the other processes no longer hand its redirect here."""
        if self.relay is None:
            return
        try:
            await self.relay.forget(state)
        except DatabaseError as exc:
            logger.warning("an ended login could not be forgotten (it expires): %s", exc)

    async def receive(self, query: str) -> str:
        """A redirect's query as a listener received it; returns what to tell the browser.

        A login of this process is completed here; another's is handed to the process that waits
        for it (``relay``), and the browser is told its outcome if it comes soon.
        """
        state = _one(parse_qs(query, keep_blank_values=True), "state") or ""
        if self.relay is None or state in self.pending:
            return self.complete(query)
        if not state:
            return UNKNOWN
        try:
            return await self.relay.hand(state, query)
        except DatabaseError as exc:
            logger.warning("a login redirect could not be handed on: %s", exc)
            return UNDELIVERED

    def complete(self, query: str, *, scope: str | None = None, owner: str | None = None) -> str:
        """Hand a redirect's query to the login it belongs to; returns what to tell the person.

        ``scope`` and ``owner`` are given when the owner pasted the redirect URL into a chat:
        then the login must be that chat's and that owner's.
        """
        params = parse_qs(query, keep_blank_values=True)
        state = _one(params, "state") or ""
        login = self.pending.get(state)
        if (
            login is None
            or login.expired
            or (scope is not None and (login.scope, login.owner) != (scope, owner))
        ):
            # Unknown, used, expired or another chat's: all the same to whoever sent it.
            return UNKNOWN
        del self.pending[state]  # used once
        close = "" if scope is not None else " You can close this window."
        if (error := _one(params, "error")) is not None:
            description = _one(params, "error_description")
            login.refusal = f"{error[:60]}: {description[:200]}" if description else error[:60]
            login.complete(AuthorizationCodeResult(code="", state=state, iss=_one(params, "iss")))
            # Told in the chat where the owner pasted it (a group, maybe): an RFC's code at most.
            named = f" ({error})" if error in OAUTH_ERROR_CODES else ""
            return f"The authorization server refused the login{named}.{close}"
        code = _one(params, "code") or ""
        login.known(code)
        login.complete(AuthorizationCodeResult(code=code, state=state, iss=_one(params, "iss")))
        return f"Playa received the login for {login.server}.{close}"

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            try:
                with anyio.fail_after(10):
                    head = await _read_head(stream)
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, ValueError):
                return
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, _, rest = line.partition(" ")
            target = rest.rpartition(" ")[0]
            parts = urlsplit(target)
            if method != "GET" or parts.path != CALLBACK_PATH:
                await _respond(stream, 404, "Not found.")
                return
            await _respond(stream, 200, await self.receive(parts.query))


def _one(params: dict[str, list[str]], name: str) -> str | None:
    values = params.get(name)
    return values[0] if values and len(values) == 1 else None


async def _read_head(stream: SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
        if len(data) > _MAX_REQUEST:
            raise ValueError("request too large")
    return data


async def _respond(stream: SocketStream, status: int, text: str) -> None:
    body = (
        "<!doctype html><meta charset=utf-8><title>Playa</title><p>"
        + text.replace("&", "&amp;").replace("<", "&lt;")
        + "</p>"
    ).encode()
    reason = {200: "OK", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nReferrer-Policy: no-referrer\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(head + body)


def duration_text(seconds: float) -> str:
    """``600`` → "10 minutes", ``30`` → "30 seconds", ``1`` → "1 second" (rounded up: never shorter than it was)."""
    if seconds >= 120:
        return f"{math.ceil(seconds / 60)} minutes"
    count = math.ceil(seconds)
    return f"{count} second{'' if count == 1 else 's'}"
