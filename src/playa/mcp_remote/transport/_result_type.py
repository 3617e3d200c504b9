"""A transport whose 2026-07-28 results without ``resultType`` read as ``"complete"``.

The protocol of 2026-07-28 (SEP-2322) says a client MUST take a result without ``resultType``
as a complete one. The SDK's client validates ``tools/call`` results against the schema, where
the field is required, and fails the call instead. This wrapper sits between the transport and
the SDK's session and fills the default in on a modern connection; older protocols have no
``resultType``, and their results pass untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any, Self

import mcp_types
from mcp.client import Transport as ClientTransport
from mcp.client._transport import ReadStream, TransportStreams
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["complete_by_default"]


class _DefaultingStream:
    """The transport's read stream, with ``resultType`` filled in on a modern connection."""

    def __init__(
        self, inner: ReadStream[SessionMessage | Exception], protocol: Callable[[], str | None]
    ) -> None:
        self._inner = inner
        self._protocol = protocol

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's context from the stream when it has one.
        return getattr(self._inner, "last_context", None)

    def _fill(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        if isinstance(item, SessionMessage) and isinstance(item.message, mcp_types.JSONRPCResponse):
            result = item.message.result
            if "resultType" not in result and self._protocol() in MODERN_PROTOCOL_VERSIONS:
                result["resultType"] = "complete"
        return item

    async def receive(self) -> SessionMessage | Exception:
        return self._fill(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        return self._fill(await self._inner.__anext__())

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._inner.__aexit__(*exc_info)


def complete_by_default(transport: ClientTransport, protocol: Callable[[], str | None]) -> ClientTransport:
    """``transport`` with results defaulting to ``resultType: "complete"`` while ``protocol()`` is modern."""

    @asynccontextmanager
    async def wrapped() -> Any:
        async with transport as (read_stream, write_stream):
            streams: TransportStreams = (_DefaultingStream(read_stream, protocol), write_stream)
            yield streams

    result: ClientTransport = wrapped()
    return result
