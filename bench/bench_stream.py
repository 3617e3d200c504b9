"""Target of a streamed reply: its first text is on the screen within 150 ms of the provider's first token.

A loopback provider speaks the OpenAI Chat Completions stream (server-sent events over HTTP/1.1,
chunked) to pydantic-ai's real OpenAI client: it writes the reply's first token, then holds the
rest back for a while, so that only streaming can show text before it. The front end is the
console's, writing to a terminal stand-in that notes when the first text reaches it; every
version passes the reply's gate on its way (the chat's redactor knows a secret, so the held
tail is looked for at each version).

Measured: from the moment the provider wrote the first token's event to the moment the first
text was written, per turn.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from bench._common import LOOPBACK, Report, Spread, verdict
from bench._playa import data_dir, message
from playa.agent import Host, HostConfig
from playa.console._live import ConsoleLive
from playa.console._ui import ConsoleUI
from playa.core import EnvPolicy

TARGET = 0.150
"""Seconds from the provider's first token to the first text shown."""
HOLD = 0.5
"""Seconds the provider waits after the first token before the rest: longer than the target."""
SECRET = "bench-stream-secret-6c1d9e2f0a7b4e38"
WORDS = ["Hello", " there", ",", " the", " reply", " streams", " as", " it", " is", " written", "."]


@dataclass
class _Provider:
    """Chat Completions streamed over loopback; notes when each reply's first token was written."""

    url: str = ""
    first_token: list[float] = field(default_factory=list)

    async def serve(self, stream: anyio.abc.SocketStream) -> None:
        buffered = b""
        async with stream:
            while True:
                while b"\r\n\r\n" not in buffered:
                    chunk = await stream.receive()
                    if not chunk:
                        return
                    buffered += chunk
                head, _, buffered = buffered.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                while len(buffered) < length:
                    buffered += await stream.receive()
                buffered = buffered[length:]
                await self._answer(stream)

    async def _answer(self, stream: anyio.abc.SocketStream) -> None:
        await stream.send(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        await _event(stream, _chunk({"role": "assistant", "content": ""}))
        await _event(stream, _chunk({"content": WORDS[0]}))
        self.first_token.append(time.perf_counter())
        await anyio.sleep(HOLD)
        for word in WORDS[1:]:
            await _event(stream, _chunk({"content": word}))
        await _event(stream, _chunk({}, "stop"))
        await _event(stream, "[DONE]")
        await stream.send(b"0\r\n\r\n")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "gpt-5.5",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


async def _event(stream: anyio.abc.SocketStream, data: str) -> None:
    body = f"data: {data}\n\n".encode()
    await stream.send(f"{len(body):x}\r\n".encode() + body + b"\r\n")


@contextlib.asynccontextmanager
async def _serving() -> AsyncIterator[_Provider]:
    provider = _Provider()
    listener = await anyio.create_tcp_listener(local_host=LOOPBACK, local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    provider.url = f"http://{LOOPBACK}:{port}/v1"
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, provider.serve)
        try:
            yield provider
        finally:
            tg.cancel_scope.cancel()


class _Screen(io.StringIO):
    """A terminal stand-in: notes when text (not a line clear) first reaches it."""

    def __init__(self) -> None:
        super().__init__()
        self.first_text: float | None = None

    def write(self, text: str, /) -> int:
        if self.first_text is None and text.replace("\r\x1b[K", "").strip():
            self.first_text = time.perf_counter()
        return super().write(text)


async def run(quick: bool) -> Report:
    report = Report("stream", "Streamed reply: time to the first text shown after the provider's first token")
    turns = 5 if quick else 20
    delays: list[float] = []
    async with _serving() as provider:
        model = OpenAIChatModel(
            "gpt-5.5", provider=OpenAIProvider(base_url=provider.url, api_key="bench-key")
        )
        with data_dir() as data:
            config = HostConfig(data_dir=data, model=model, env=EnvPolicy(environ={"OPENAI_API_KEY": SECRET}))
            async with Host(config) as host:
                session = await host.session("console:bench", owner="owner")
                for n in range(turns):
                    screen = _Screen()
                    ui = ConsoleUI(io.StringIO(), screen, interactive=True)
                    live = ConsoleLive(ui, screen)
                    async with live.running():
                        reply = await host.handle(session, message(f"turn {n}"), ui, live=live)
                        assert reply is not None and reply.text == "".join(WORDS), reply
                        live.finish(reply.text)
                    assert screen.first_text is not None
                    delays.append(screen.first_text - provider.first_token[-1])
    spread = Spread.of(delays)
    report.add(
        "first token → first text shown (console, gated)",
        spread.text(),
        target=f"≤ {TARGET * 1e3:.0f} ms",
        verdict=verdict(spread.median <= TARGET and max(delays) < HOLD),
    )
    report.notes.append(
        f"pydantic-ai's real OpenAI client over loopback; the provider holds the rest of the reply "
        f"{HOLD * 1e3:.0f} ms after its first token, so only a streamed first token can show sooner. "
        "Telegram shows the same version as its first draft (private chats) or message (groups)."
    )
    report.chart["first_text_s"] = delays
    return report


if __name__ == "__main__":
    from bench.__main__ import print_report

    print_report(anyio.run(run, True))
