"""The result budget: how many bytes one answer of a remote MCP server may hold in memory.

A server can answer a tool call with gigabytes (or a small gzip body that inflates to them);
the SDK reads a JSON answer whole (``response.aread()``), so without a bound one call could
exhaust the host's memory. The cap is enforced while reading, on the decoded bytes:

- Streamable HTTP answers each request on its POST response, a JSON body or an event stream.
  ``ResultBudget.wrap`` (in an httpx2 response hook) wraps the body of every non-GET
  response in a stream that decodes gzip/deflate itself, in bounded steps, and stops with
  ``ResultTooLarge`` once more than ``limit`` bytes came. The SDK turns that into an error
  answer to that one request: the call fails with a clear reason and the session stays usable.
  Cutting the answer and delivering its first bytes is not possible here: the bytes are one
  JSON-RPC message, and a cut message no longer parses.
- GET responses are long-lived event streams (a resumed answer over Streamable HTTP, the
  whole SSE transport), where a total cap would end a healthy session after enough small
  events: they are capped per event (``event_limit``) instead. The SSE transport carries
  every result on that one stream, and its SDK client refuses events over 1 MiB on its own
  (``sse_client`` takes no limit), so over SSE the budget is at most 1 MiB, and a cut result
  ends the stream: the call fails clearly, the connection breaks and the next call reconnects.
  ``oversized_event`` recognises the SDK's own refusal, should it come first.
"""

from __future__ import annotations

import logging
import math
import re
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Final, NoReturn

import anyio
import httpx2

from ._errors import exception_tree

__all__ = ["SSE_TRANSPORT_EVENT_LIMIT", "ResultBudget", "ResultTooLarge", "format_size", "oversized_event"]

logger = logging.getLogger(__name__)

SSE_TRANSPORT_EVENT_LIMIT: Final = 1024 * 1024
"""What the SDK's SSE transport accepts in one event; ``sse_client`` cannot change it."""

# Each decompression step yields at most this much, so a bomb never inflates in one piece.
_DECODE_STEP: Final = 64 * 1024
# How long, and how much, the rest of an answer the SDK stopped reading is read (see _drain).
_DRAIN_SECONDS: Final = 0.25
_DRAIN_BYTES: Final = 64 * 1024


def format_size(size: int) -> str:
    """A byte count for a person: ``4 MiB``, ``512 KiB``, ``100 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} bytes"


def too_large_reason(limit: int) -> str:
    """The reason a call fails with when its result is over ``limit``: for the model and the owner."""
    return f"the result is larger than {format_size(limit)}, the most this host reads; it was not read"


class ResultTooLarge(httpx2.StreamError):
    """A response body grew past the budget; reading it stopped.

    A ``StreamError``, because that is what the SDK's JSON path turns into an error answer to
    the one request instead of a failure of the whole transport.
    """


class _Decoder:
    """Bounded gzip/deflate decoding (httpx2's own decoder would be skipped: the header is removed)."""

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._first = True
        wbits = zlib.MAX_WBITS | 16 if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._zlib = zlib.decompressobj(wbits)

    def decode(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``data``, one bounded step at a time (a generator: the caller stops it)."""
        try:
            piece = self._zlib.decompress(data, _DECODE_STEP)
        except zlib.error:
            if not (self._first and self._encoding == "deflate"):
                raise
            # "deflate" is sent both zlib-wrapped (as specified) and raw (as often done).
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            piece = self._zlib.decompress(data, _DECODE_STEP)
        self._first = False
        while piece:
            yield piece
            piece = self._zlib.decompress(self._zlib.unconsumed_tail, _DECODE_STEP)


# The end of a server-sent event: a blank line, in any of the three line endings.
_EVENT_END: Final = re.compile(rb"\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n")


class _CappedStream(httpx2.AsyncByteStream):
    """A response body, decoded here in bounded steps, that stops once too many bytes came.

    ``per_event``: the count starts over after each blank line (an event stream's event end).
    """

    def __init__(
        self, inner: httpx2.AsyncByteStream, budget: ResultBudget, encoding: str, *, per_event: bool
    ) -> None:
        self._inner = inner
        self._budget = budget
        self._encoding = encoding
        self._per_event = per_event
        self._decoder = _Decoder(encoding) if encoding not in ("identity", "unsupported") else None
        self._chunks: AsyncIterator[bytes] | None = None
        self._ended = False
        self._abandoned = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        if self._decoder is None and not self._per_event and self._encoding != "unsupported":
            # The common answer, a plain body: counted as it comes, by an iterator rather than
            # an async generator, whose machinery costs an answer more than the counting.
            self._chunks = chunks = aiter(self._inner)
            return _Counted(self, chunks, self._budget.limit)
        return self._decoded()

    async def _decoded(self) -> AsyncIterator[bytes]:
        if self._encoding == "unsupported":
            # Only gzip and deflate are offered (Accept-Encoding); anything else would be
            # decoded by httpx2 outside this budget.
            raise httpx2.StreamError("the server used a content encoding this client did not offer")
        limit = self._budget.event_limit if self._per_event else self._budget.limit
        seen = 0
        tail = b""
        self._chunks = chunks = aiter(self._inner)
        async for chunk in chunks:
            pieces = self._decoder.decode(chunk) if self._decoder is not None else iter((chunk,))
            while True:
                try:
                    piece = next(pieces, None)
                except zlib.error as exc:
                    raise httpx2.StreamError("the server's compressed answer is corrupt") from exc
                if piece is None:
                    break
                seen += len(piece)
                if self._per_event:
                    # A blank line may straddle two pieces: look at the previous piece's end too.
                    window = tail + piece
                    ends = list(_EVENT_END.finditer(window))
                    if ends:
                        seen = len(window) - ends[-1].end()
                    tail = window[-3:]
                if seen > limit:
                    self.cut(limit)
                yield piece
        self._ended = True

    def ended(self) -> None:
        """The body was read to its end."""
        self._ended = True

    def cut(self, limit: int) -> NoReturn:
        """Stop reading: the body brought more than ``limit`` bytes."""
        if self._per_event:
            self._budget.exceeded_events += 1
        else:
            self._budget.exceeded += 1
        self._abandoned = True  # the rest is not worth reading, not even to keep the connection
        raise ResultTooLarge(too_large_reason(limit))

    async def aclose(self) -> None:
        try:
            # A reader being cancelled (a call's timeout, a connection closing) would be
            # cancelled at the drain's first read: it reads nothing.
            if not (
                self._ended
                or self._abandoned
                or self._per_event
                or anyio.current_effective_deadline() == -math.inf
            ):
                await self._drain(self._chunks if self._chunks is not None else aiter(self._inner))
        finally:
            await self._inner.aclose()

    async def _drain(self, chunks: AsyncIterator[bytes]) -> None:
        """Read what is left of an answer the SDK stopped reading, briefly, so its connection is kept.

        The SDK closes an answer's event stream as soon as the answer's event came, before the
        server's end of the stream, which follows at once, and it never reads the empty body of
        the 202 that accepts a notification. httpx2 then drops the connection, and the next
        request opens a new one (a TCP and TLS handshake each time). Reading that end lets the
        connection go back to the pool. The caller already has its answer; a server
        that keeps the stream open costs this task ``_DRAIN_SECONDS`` and its connection.
        """
        drained = 0
        with anyio.move_on_after(_DRAIN_SECONDS):
            try:
                async for chunk in chunks:
                    drained += len(chunk)
                    if drained > _DRAIN_BYTES:
                        return
            except Exception as exc:  # the answer was delivered: a broken rest only loses the connection
                # The type only: the error's text is the transport's, which may quote the server.
                logger.debug(
                    "the rest of an answer could not be read (%s); its connection is dropped",
                    type(exc).__name__,
                )


class _Counted:
    """A plain body's chunks, counted against the budget's ``limit`` as they come."""

    __slots__ = ("_chunks", "_limit", "_seen", "_stream")

    def __init__(self, stream: _CappedStream, chunks: AsyncIterator[bytes], limit: int) -> None:
        self._stream = stream
        self._chunks = chunks
        self._limit = limit
        self._seen = 0

    def __aiter__(self) -> _Counted:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            self._stream.ended()
            raise
        self._seen += len(chunk)
        if self._seen > self._limit:
            self._stream.cut(self._limit)
        return chunk


class ResultBudget:
    """An httpx2 response hook that bounds what each response body may bring, decoded.

    A non-GET body (the answer to one request) may bring ``limit`` bytes in all; a GET body
    (a long-lived event stream) ``event_limit`` bytes per event. ``exceeded`` and
    ``exceeded_events`` count the bodies that were cut off, so the connection can tell a call
    that failed for its size from other failures.
    """

    def __init__(self, limit: int, *, event_limit: int | None = None) -> None:
        self.limit = limit
        self.event_limit = limit if event_limit is None else event_limit
        self.exceeded = 0
        self.exceeded_events = 0

    async def on_response(self, response: httpx2.Response) -> None:
        """The budget as an httpx2 response hook of its own."""
        self.wrap(response, per_event=response.request.method == "GET")

    def wrap(self, response: httpx2.Response, *, per_event: bool) -> None:
        """Bound ``response``'s body (before anything reads it): per event for a GET's event stream."""
        headers = response.headers
        encoding = "identity"
        if (given := headers.get("content-encoding")) is not None:
            encoding = given.strip().lower() or "identity"
            if encoding not in ("identity", "gzip", "x-gzip", "deflate"):
                encoding = "unsupported"
            # Decoded here, so httpx2 must not decode again.
            del headers["content-encoding"]
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(stream, self, encoding, per_event=per_event)


def oversized_event(exc: BaseException) -> bool:
    """True when ``exc`` (or one inside it) is the SDK's refusal of an event over its size limit."""
    for current in exception_tree(exc):
        if isinstance(current, httpx2.SSEError) and "byte limit" in str(current):
            return True
        if "Server-sent event exceeded" in str(current):
            # The Streamable HTTP client passes the SSEError on only as the text of an error answer.
            return True
    return False
