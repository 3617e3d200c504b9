"""Serving an ASGI app with uvicorn inside a running event loop, on a socket bound beforehand.

Binding first lets the caller learn the real port (``port=0``) before serving starts; the
connections that arrive before uvicorn accepts wait in the listen backlog.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Literal

import anyio
import uvicorn
from starlette.types import ASGIApp

__all__ = ["bind", "serving"]


def bind(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A listening, non-blocking TCP socket on ``host:port``; raises ``OSError``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not the default 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) on the
    # accepted connections only when the socket says it is TCP. With Nagle on, an answer that
    # uvicorn writes in two parts waits for the client's delayed ACK (~40 ms) on every request
    # of a reused connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class _Server(uvicorn.Server):
    """Uvicorn without its signal handlers: Ctrl-C belongs to the program that embeds it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving(
    app: ASGIApp, sock: socket.socket, *, lifespan: Literal["on", "off"] = "on", grace: float = 2.0
) -> AsyncIterator[anyio.Event]:
    """Serve ``app`` on ``sock`` while the block runs; yields an event set once serving stops.

    Leaving the block (or cancelling it) stops uvicorn through ``should_exit`` and waits for its
    shutdown, bounded by ``grace``: the app's lifespan shutdown still runs.
    """
    config = uvicorn.Config(
        app,
        log_config=None,  # only the CLI configures logging
        access_log=False,
        lifespan=lifespan,
        timeout_graceful_shutdown=int(grace) or 1,
    )
    server = _Server(config)
    stopped = anyio.Event()

    async def run() -> None:
        try:
            # Shielded: cancellation stops uvicorn through should_exit, so its shutdown runs.
            with anyio.CancelScope(shield=True):
                await server.serve(sockets=[sock])
        finally:
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            yield stopped
        finally:
            server.should_exit = True
            with anyio.move_on_after(grace + 1.0, shield=True):
                await stopped.wait()
