"""A round-robin reverse proxy on loopback: it spreads requests across several backends, as a
load balancer spreads Telegram's webhook posts across the processes of one bot.

Each request goes to the next backend in turn; a backend that does not accept the connection
(a process that is down or still starting) is skipped for the next. When none accepts, or the
chosen one breaks off mid-request, the answer is 502 and the sender retries, as Telegram does.

    async with serve_balancer([url_a, url_b, url_c]) as balancer:
        ...  # post to balancer.url; balancer.served counts what each backend answered
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
from starlette.types import Receive, Scope, Send

from servers.python_servers import RunningServer, buffered, send_answer, serve_asgi

__all__ = ["Balancer", "serve_balancer"]

_FORWARDED = frozenset({"content-type", "x-telegram-bot-api-secret-token"})
"""The request headers passed on: what a webhook post needs, nothing of the proxy's own."""


@dataclass
class Balancer:
    """The proxy's state: its backends, and how many requests each answered with a 200."""

    backends: Sequence[str]
    client: httpx.AsyncClient
    served: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    """Requests no backend took (answered 502)."""
    _turn: itertools.count[int] = field(default_factory=itertools.count)
    running: RunningServer | None = None

    @property
    def url(self) -> str:
        assert self.running is not None
        return self.running.url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body, _ = await buffered(receive)
        headers = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() in _FORWARDED
        }
        start = next(self._turn)
        for step in range(len(self.backends)):
            backend = self.backends[(start + step) % len(self.backends)]
            try:
                response = await self.client.request(
                    scope["method"], backend + scope["path"], content=body, headers=headers
                )
            except httpx.ConnectError:
                continue  # down: the next one
            except httpx.TransportError:
                break  # it took the request and died: whether it committed the update is unknown
            if response.status_code == 200:
                self.served[backend] += 1
            kind = response.headers.get("content-type", "application/json").encode("latin-1")
            await send_answer(send, response.status_code, response.content, content_type=kind)
            return
        self.refused += 1
        await send_answer(send, 502, b"no backend", content_type=b"text/plain")


@asynccontextmanager
async def serve_balancer(backends: Sequence[str], *, timeout: float = 60.0) -> AsyncIterator[Balancer]:
    """The proxy for ``backends`` (root URLs, no trailing slash), on a free loopback port."""
    async with httpx.AsyncClient(trust_env=False, timeout=timeout) as client:
        balancer = Balancer(list(backends), client)
        async with serve_asgi(balancer) as running:
            balancer.running = running
            yield balancer
