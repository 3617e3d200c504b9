"""Receiving updates by webhook: a small HTTP endpoint that Telegram posts updates to."""

from __future__ import annotations

import base64
import hmac
import html
import json
import logging
import re
import secrets
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from telegram import Bot, Update
from telegram.error import TelegramError

from .._asgi import bind, serving
from ..exceptions import ConfigError
from ._health import Operations

__all__ = [
    "SECRET_HEADER",
    "RedirectRoute",
    "WebhookConfig",
    "serve_listener",
    "serve_webhook",
    "webhook_secret",
]

logger = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
_MAX_BODY = 1 << 20


def _new_secret() -> str:
    return secrets.token_urlsafe(32)


def webhook_secret(token: str) -> str:
    """The webhook's secret token for the bot with ``token``: the same in every process that
    serves the bot, so any of them may receive any update; known only to who knows the token."""
    digest = hmac.new(token.encode(), b"playa webhook secret token v1", "sha256").digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


@dataclass(frozen=True, kw_only=True)
class WebhookConfig:
    """Where Telegram posts updates (``url``) and where this process listens for them.

    A reverse proxy usually terminates HTTPS at ``url`` and forwards to ``listen:port``.
    Telegram sends ``secret_token`` with every update; requests without it are refused.
    """

    url: str
    listen: str = "127.0.0.1"
    port: int = 8443
    path: str | None = None
    """The path served; by default the path of ``url``."""
    secret_token: str = field(default_factory=_new_secret, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            # Telegram posts only to https; http is for a local Bot API server (and tests).
            raise ConfigError(
                f"the webhook URL must be an http(s) URL (Telegram needs https), got {self.url!r}"
            )
        if parts.username or parts.password:
            raise ConfigError("the webhook URL must not hold credentials")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"the webhook port must be 0-65535, got {self.port}")
        if not _SECRET.fullmatch(self.secret_token):
            raise ConfigError("the webhook secret token must be 1-256 of A-Z, a-z, 0-9, _ and -")

    @property
    def route(self) -> str:
        path = self.path if self.path is not None else urlsplit(self.url).path
        return "/" + path.lstrip("/")


@dataclass(frozen=True, kw_only=True)
class RedirectRoute:
    """A login's redirect, served behind the public URL: by the webhook's listener, or with long
    polling by the bot's own listener (``serve_listener``).

    A GET of ``path`` hands its query to ``complete``, whose answer the owner's browser shows
    (with several processes, once the process whose login it is has completed it, or a few seconds).
    """

    path: str
    complete: Callable[[str], Awaitable[str]] = field(repr=False)


def _bind(host: str, port: int, what: str = "the webhook") -> socket.socket:
    try:
        return bind(host, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen for {what} on {host}:{port}: {exc.strerror}") from None


def _redirect_route(redirect: RedirectRoute) -> Route:
    async def redirected(request: Request) -> Response:
        # The query holds the authorization code: the page tells only the outcome, is never
        # cached, and sends no referrer anywhere.
        text = await redirect.complete(request.url.query)
        page = f"<!doctype html><meta charset=utf-8><title>Playa</title><p>{html.escape(text)}</p>"
        return HTMLResponse(page, headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})

    return Route(redirect.path, redirected, methods=["GET"])


def _app(
    bot: Bot,
    config: WebhookConfig,
    on_update: Callable[[Update], Awaitable[None]],
    redirect: RedirectRoute | None = None,
    operations: Operations | None = None,
) -> Starlette:
    expected = config.secret_token.encode()

    async def receive(request: Request) -> Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        # Checked before the body is read: only Telegram knows the secret.
        if not hmac.compare_digest(given, expected):
            return Response(status_code=403)
        body = await request.body()
        if len(body) > _MAX_BODY:
            return Response(status_code=413)
        try:
            update = Update.de_json(json.loads(body), bot)
        except Exception as exc:  # boundary: a malformed update is refused, the endpoint stays up
            logger.warning("a webhook update could not be read: %s", type(exc).__name__)
            return Response(status_code=400)
        # Answered only once the update is handled or sealed in the inbox: a 200 is Telegram's
        # signal that it may forget the update.
        await on_update(update)
        return Response(status_code=200)

    routes = [Route(config.route, receive, methods=["POST"])]
    if redirect is not None:
        routes.append(_redirect_route(redirect))
    if operations is not None:
        routes += operations.routes()
    return Starlette(routes=routes)


async def serve_listener(
    listen: tuple[str, int],
    *,
    redirect: RedirectRoute | None = None,
    operations: Operations | None = None,
    listening: Callable[[int], None] | None = None,
) -> None:
    """Serve a login's redirect and ``operations``' endpoints on ``listen`` until cancelled.

    With long polling there is no webhook listener to serve them beside: the operator's proxy
    forwards the public URL's redirect here instead.
    """
    host, wanted = listen
    sock = _bind(host, wanted, "the login redirect" if redirect is not None else "/healthz and /metrics")
    routes = [_redirect_route(redirect)] if redirect is not None else []
    routes += operations.routes() if operations is not None else []
    try:
        async with serving(Starlette(routes=routes), sock, lifespan="off", grace=2.0) as stopped:
            port: int = sock.getsockname()[1]
            if listening is not None:
                listening(port)
            logger.info("listening on %s:%s", host, port)
            await stopped.wait()
    finally:
        sock.close()


async def serve_webhook(
    bot: Bot,
    config: WebhookConfig,
    on_update: Callable[[Update], Awaitable[None]],
    *,
    allowed_updates: Sequence[str],
    listening: Callable[[int], None] | None = None,
    redirect: RedirectRoute | None = None,
    operations: Operations | None = None,
) -> None:
    """Serve the webhook endpoint until cancelled; register it with Telegram once it listens.

    ``listening(port)`` is called with the bound port (useful with ``port=0``); ``redirect``
    and ``operations``' endpoints are served beside the webhook.
    """
    sock = _bind(config.listen, config.port)
    try:
        app = _app(bot, config, on_update, redirect, operations)
        async with serving(app, sock, lifespan="off", grace=2.0) as stopped:
            port: int = sock.getsockname()[1]
            if listening is not None:
                listening(port)
            try:
                await bot.set_webhook(
                    config.url,
                    secret_token=config.secret_token,
                    allowed_updates=list(allowed_updates),
                )
            except TelegramError as exc:
                raise ConfigError(f"Telegram refused the webhook {config.url}: {exc}") from None
            logger.info("webhook registered; listening on %s:%s%s", config.listen, port, config.route)
            await stopped.wait()
    finally:
        sock.close()
