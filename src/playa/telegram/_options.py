"""The ``playa telegram`` options: flags and environment, checked, ready for ``run_telegram``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..exceptions import ConfigError
from ._webhook import WebhookConfig, webhook_secret

__all__ = ["TelegramOptions", "public_url_from", "telegram_options"]

ENV_TOKEN = "TELEGRAM_BOT_TOKEN"
ENV_BASE_URL = "PLAYA_TELEGRAM_BASE_URL"
ENV_WEBHOOK_URL = "PLAYA_TELEGRAM_WEBHOOK_URL"
ENV_PUBLIC_URL = "PLAYA_PUBLIC_URL"
ENV_LISTEN = "PLAYA_LISTEN"
DEFAULT_LISTEN = ("127.0.0.1", 8443)


@dataclass(frozen=True, kw_only=True)
class TelegramOptions:
    """What ``run_telegram`` needs besides the host. The token never shows in ``repr``."""

    token: str = field(repr=False)
    base_url: str | None = None
    webhook: WebhookConfig | None = None
    public_url: str | None = None
    """Where the owner's browser reaches this host (``$PLAYA_PUBLIC_URL``): logins redirect to
    ``<public_url>/oauth/callback``, which the webhook's listener serves, or ``listen``."""
    listen: tuple[str, int] | None = None
    """With long polling: the address of the bot's own listener (``--listen`` or ``$PLAYA_LISTEN``;
    127.0.0.1:8443 with ``public_url``), which serves ``/healthz`` and ``/metrics``, and the login
    redirect that the operator's proxy forwards from the public URL."""


def telegram_options(args: argparse.Namespace, environ: Mapping[str, str]) -> TelegramOptions:
    """Options from parsed flags, then the environment; ``ConfigError`` says what to fix."""
    token = environ.get(ENV_TOKEN, "").strip()
    if not token:
        raise ConfigError(f"set {ENV_TOKEN} to the token @BotFather gave your bot")
    base_url = getattr(args, "base_url", None) or environ.get(ENV_BASE_URL) or None
    if base_url is not None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"the Bot API base URL must be an http(s) URL, got {base_url!r}")
    webhook_url = getattr(args, "webhook_url", None) or environ.get(ENV_WEBHOOK_URL) or None
    webhook = None
    if webhook_url is not None:
        webhook = WebhookConfig(
            url=webhook_url,
            listen=getattr(args, "webhook_listen", "127.0.0.1"),
            port=getattr(args, "webhook_port", 8443),
            # The same in every process of the bot (several may serve it, with a database).
            secret_token=webhook_secret(token),
        )
    public_url = public_url_from(environ)
    listen_text = getattr(args, "listen", None) or environ.get(ENV_LISTEN, "").strip() or None
    listen = None
    if listen_text is not None and webhook is not None:
        raise ConfigError(
            f"{ENV_LISTEN} (--listen) is for long polling: with the webhook, its listener "
            "(--webhook-listen, --webhook-port) serves the login redirect, /healthz and /metrics; unset it"
        )
    if listen_text is not None:
        listen = _address(listen_text)
    elif public_url is not None and webhook is None:
        listen = DEFAULT_LISTEN
    return TelegramOptions(
        token=token, base_url=base_url, webhook=webhook, public_url=public_url, listen=listen
    )


def _address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8443`` for IPv6) as a host and a port."""
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError(f"{ENV_LISTEN} (--listen) must be HOST:PORT, like 127.0.0.1:8443; got {text!r}")
    return host, int(port)


def public_url_from(environ: Mapping[str, str]) -> str | None:
    """``$PLAYA_PUBLIC_URL``, checked: a plain http(s) URL; None if unset."""
    public_url = environ.get(ENV_PUBLIC_URL, "").strip() or None
    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            # Not quoted: it may hold credentials, checked next.
            raise ConfigError(f"{ENV_PUBLIC_URL} must be an http(s) URL (https on the internet)")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ConfigError(f"{ENV_PUBLIC_URL} must be a plain URL: no credentials, query or fragment")
    return public_url
