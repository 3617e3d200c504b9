"""How a bot is served: where its updates come from, what else its listener answers, and how the
caller follows and stops it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from ..exceptions import ConfigError
from ._webhook import RedirectRoute, WebhookConfig

__all__ = ["Serving"]


@dataclass(frozen=True, kw_only=True, eq=False)
class Serving:
    """How ``run_telegram`` (``TelegramBot.run``) serves: long polling unless ``webhook`` is set.

    ``redirect`` (a login's redirect), ``/healthz`` and ``/metrics`` are served by the webhook's
    listener, or with long polling by a listener of its own on ``listen``; the health check runs
    ``probe`` (the database's ``SELECT 1``). ``listening`` is told the port the webhook's listener
    bound. Setting ``stop`` stops the bot gracefully.
    """

    webhook: WebhookConfig | None = None
    listen: tuple[str, int] | None = None
    """With long polling, where the bot's own listener binds (host, port); None: no listener."""
    redirect: RedirectRoute | None = None
    probe: Callable[[], Awaitable[None]] | None = None
    listening: Callable[[int], None] | None = None
    stop: anyio.Event | None = None

    def __post_init__(self) -> None:
        if self.webhook is None and self.redirect is not None and self.listen is None:
            raise ConfigError("the login redirect has no address to listen on: set PLAYA_LISTEN")
