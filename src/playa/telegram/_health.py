"""``/healthz`` and ``/metrics`` on the bot's listener, for the operator's prober and Prometheus.

Both are served on the listener's own address only; the operator's proxy forwards the webhook's
path and the login redirect, never these (docs/security.md says what they reveal).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

import anyio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..core import Gauge, exposition, outbound_secrets, process_metrics

__all__ = ["HEALTH_PATH", "METRICS_PATH", "PROBE_TIMEOUT", "Operations"]

logger = logging.getLogger(__name__)

HEALTH_PATH: Final = "/healthz"
METRICS_PATH: Final = "/metrics"
PROBE_TIMEOUT: Final = 2.0
"""Seconds the database has to answer a health check's ``SELECT 1``."""
_TEXT_FORMAT: Final = "text/plain; version=0.0.4; charset=utf-8"
_NO_STORE: Final = {"Cache-Control": "no-store"}


@dataclass(frozen=True, kw_only=True)
class Operations:
    """What the two endpoints answer from: the gauges read at each scrape, and the database's check.

    A health check that is answered at all shows the event loop serves; with a database, its
    pool must also answer ``probe`` (a ``SELECT 1``) within ``probe_timeout``.
    """

    gauges: Sequence[Gauge] = ()
    probe: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    probe_timeout: float = PROBE_TIMEOUT

    def routes(self) -> list[Route]:
        return [
            Route(HEALTH_PATH, self._health, methods=["GET"]),
            Route(METRICS_PATH, self._metrics, methods=["GET"]),
        ]

    async def _health(self, request: Request) -> Response:
        if self.probe is not None:
            try:
                with anyio.fail_after(self.probe_timeout):
                    await self.probe()
            except Exception as exc:  # boundary: any failure of the check is one word, not its text
                # The error's type only: its text could name the database's address.
                logger.warning("health check: the database did not answer (%s)", type(exc).__name__)
                return PlainTextResponse("database\n", status_code=503, headers=_NO_STORE)
        return PlainTextResponse("ok\n", headers=_NO_STORE)

    async def _metrics(self, request: Request) -> Response:
        text = exposition(process_metrics(), self.gauges, redact=outbound_secrets().pieces.redact)
        return Response(text, media_type=_TEXT_FORMAT, headers=_NO_STORE)
