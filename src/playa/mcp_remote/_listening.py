"""The HTTP client of a Streamable HTTP connection: it never opens the listening stream.

After the handshake the SDK's Streamable HTTP client sends a GET to the endpoint, a stream on
which the server may send requests and notifications outside any call. The protocol makes it
optional (the client MAY open it), and Playa has no use for it: it declines every request a
server starts and does not follow list changes, while replies to a call still arrive on that
call's own POST. Held open, the stream costs every connection a second HTTP connection, a
request and a task on the server, and about 30 % of the client's CPU when a host connects
its chats. The SDK has no switch for it, so :class:`NoListeningClient` answers that one GET
itself, with an event stream that stays empty until it is closed; the SDK waits on it as it
would on a quiet server and never retries.

A GET that resumes a call's interrupted answer (it carries ``Last-Event-ID``) still goes to
the server, and so does every other request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2

__all__ = ["NoListeningClient"]


class _EmptyEventStream(httpx2.AsyncByteStream):
    """A response body that sends nothing and ends when it is closed."""

    def __init__(self) -> None:
        self._closed = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await self._closed.wait()
        # An async generator that ends without a chunk once closed.
        nothing: tuple[bytes, ...] = ()
        for chunk in nothing:
            yield chunk

    async def aclose(self) -> None:
        self._closed.set()


class NoListeningClient(httpx2.AsyncClient):
    """An httpx2 client that keeps the listening GET to ``endpoint`` from reaching the server."""

    def __init__(self, *, endpoint: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._endpoint = httpx2.URL(endpoint)

    def _is_listening(self, request: httpx2.Request) -> bool:
        return (
            request.method == "GET"
            and "last-event-id" not in request.headers
            and request.url == self._endpoint
        )

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        if self._is_listening(request):
            return httpx2.Response(
                200,
                headers={"content-type": "text/event-stream"},
                stream=_EmptyEventStream(),
                request=request,
            )
        return await super().send(request, **kwargs)
