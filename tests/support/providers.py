"""Model providers on loopback: one server that speaks the OpenAI Chat Completions, OpenAI Responses
and Anthropic Messages wire protocols well enough for pydantic-ai's real provider clients.

It records every request body (parsed JSON) and answers each request with the next step of a
script: text, a tool call, a hang (no answer until released or the client gives up) or an error
status. The recorded bodies are the oracle for what the model received.

    async with serve_provider() as provider:
        provider.script(tool_call("demo__echo", {"text": "hi"}), text("done"))
        model = provider.model("openai-chat")  # pydantic-ai's real OpenAIChatModel, pointed here
        ...
        assert provider.requests[0].body["tools"][0]["function"]["name"] == "demo__echo"
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings
from starlette.types import Receive, Scope, Send

from servers.python_servers import buffered, json_or_none, send_answer, serve_asgi
from support.provider_wire import (
    PROTOCOLS,
    Event,
    Protocol,
    Text,
    ToolCall,
    answer_of,
    error_body,
    is_text_delta,
    stream_of,
)

__all__ = [
    "DUMMY_KEY",
    "PROTOCOLS",
    "Hang",
    "Protocol",
    "ProviderRequest",
    "ProviderServer",
    "Status",
    "Text",
    "ToolCall",
    "hang",
    "provider_model",
    "serve_provider",
    "status",
    "text",
    "tool_call",
]

DUMMY_KEY = "test-provider-key"
_PATHS: dict[str, Protocol] = {
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
    "/v1/messages": "anthropic",
}


@dataclass
class Hang:
    """No answer until ``release()`` (then ``then`` is answered) or until the client disconnects."""

    then: Text | ToolCall | Status | None = None
    released: anyio.Event = field(default_factory=anyio.Event)
    reached: anyio.Event = field(default_factory=anyio.Event)
    """Set when a request arrived at this step."""
    disconnected: anyio.Event = field(default_factory=anyio.Event)
    """Set when the client gave up on the request (a timeout, a cancelled turn)."""

    def release(self) -> None:
        self.released.set()


@dataclass(frozen=True)
class Status:
    """An HTTP error status with the provider's error body."""

    code: int
    message: str = "scripted error"


Step = Text | ToolCall | Hang | Status


def text(value: str) -> Text:
    return Text(value)


def tool_call(
    name: str, arguments: dict[str, Any] | None = None, *more: tuple[str, dict[str, Any]]
) -> ToolCall:
    return ToolCall(((name, arguments or {}), *more))


def hang(then: Text | ToolCall | Status | None = None) -> Hang:
    return Hang(then)


def status(code: int, message: str = "scripted error") -> Status:
    return Status(code, message)


@dataclass(frozen=True)
class ProviderRequest:
    """One request the provider received: its protocol, path, headers and parsed JSON body."""

    protocol: Protocol
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes

    @property
    def tool_names(self) -> list[str]:
        """The names of the function tools offered in this request, in order."""
        names: list[str] = []
        for tool in self.body.get("tools") or []:
            if self.protocol == "openai-chat":
                names.append(tool.get("function", {}).get("name"))
            else:
                names.append(tool.get("name"))
        return names

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool definitions as ``{"name", "description", "parameters"}``, whatever the protocol."""
        found: list[dict[str, Any]] = []
        for tool in self.body.get("tools") or []:
            if self.protocol == "openai-chat":
                function = tool.get("function", {})
                found.append(
                    {
                        "name": function.get("name"),
                        "description": function.get("description"),
                        "parameters": function.get("parameters"),
                    }
                )
            elif self.protocol == "openai-responses":
                found.append(
                    {
                        "name": tool.get("name"),
                        "description": tool.get("description"),
                        "parameters": tool.get("parameters"),
                    }
                )
            else:
                found.append(
                    {
                        "name": tool.get("name"),
                        "description": tool.get("description"),
                        "parameters": tool.get("input_schema"),
                    }
                )
        return found

    @property
    def instructions(self) -> str:
        """The system prompt / instructions text of this request."""
        if self.protocol == "openai-chat":
            return "\n\n".join(
                _text_of(message.get("content"))
                for message in self.body.get("messages", [])
                if message.get("role") in ("system", "developer")
            )
        if self.protocol == "openai-responses":
            parts = [self.body.get("instructions") or ""]
            parts += [
                _text_of(item.get("content"))
                for item in self.body.get("input", [])
                if isinstance(item, dict) and item.get("role") in ("system", "developer")
            ]
            return "\n\n".join(p for p in parts if p)
        return _text_of(self.body.get("system"))


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(
            str(block.get("text", "")) for block in content if isinstance(block, dict) and "text" in block
        )
    return ""


class ProviderServer:
    """The running provider: ``url`` is the base URL ending in ``/v1``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.requests: list[ProviderRequest] = []
        self.default: Text | ToolCall | Status = Text("(the script is over)")
        self._steps: list[Step] = []
        self._ids = itertools.count(1)
        self._arrived = anyio.Event()
        self._closing = anyio.Event()

    # The script

    def script(self, *steps: Step) -> None:
        """Append steps; each request takes the next one, then ``default`` once they run out."""
        self._steps.extend(steps)

    @property
    def pending(self) -> int:
        """Steps not taken yet."""
        return len(self._steps)

    async def wait_for_requests(self, count: int, *, timeout: float = 10.0) -> None:
        """Wait until ``count`` requests arrived in all."""
        with anyio.fail_after(timeout):
            while len(self.requests) < count:
                await self._arrived.wait()

    def model(
        self,
        protocol: Protocol,
        model_name: str | None = None,
        *,
        settings: ModelSettings | None = None,
    ) -> Model:
        """Pydantic-ai's real model class for ``protocol``, with its real provider pointed here."""
        return provider_model(self.url, protocol, model_name, settings=settings)

    # ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw, replay = await buffered(receive)
        protocol = _PATHS.get(scope["path"])
        if scope["method"] != "POST" or protocol is None:
            await _respond(send, 404, {"error": {"message": f"no route {scope['method']} {scope['path']}"}})
            return
        body = json_or_none(raw)
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
        }
        request = ProviderRequest(
            protocol, scope["path"], headers, body if isinstance(body, dict) else {}, raw
        )
        self.requests.append(request)
        step: Step = self._steps.pop(0) if self._steps else self.default
        arrived, self._arrived = self._arrived, anyio.Event()
        arrived.set()
        if isinstance(step, Hang):
            answer = await self._hang(step, replay)
            if answer is None:
                return
            step = answer
        if isinstance(step, Status):
            await _respond(send, step.code, error_body(protocol, step.message))
            return
        answer = answer_of(protocol, next(self._ids), str(request.body.get("model") or "test-model"), step)
        if request.body.get("stream"):
            streamed = isinstance(step, Text) and step.pieces
            events = stream_of(protocol, answer, step.pieces if streamed else ())
            await _respond_stream(send, events, step.between if isinstance(step, Text) else None)
        else:
            await _respond(send, 200, answer)

    async def _hang(self, step: Hang, receive: Receive) -> Text | ToolCall | Status | None:
        step.reached.set()
        async with anyio.create_task_group() as tg:

            async def until_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                step.disconnected.set()
                tg.cancel_scope.cancel()

            async def until(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(until_disconnect)
            tg.start_soon(until, step.released)
            tg.start_soon(until, self._closing)
        if step.released.is_set() and not step.disconnected.is_set():
            return step.then or self.default
        return None


async def _respond_stream(
    send: Send, events: list[Event], between: Callable[[int], Awaitable[None]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    deltas, last_delta = 0, sum(map(is_text_delta, events)) - 1
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        await send(
            {
                "type": "http.response.body",
                "body": f"{head}data: {json.dumps(data)}\n\n".encode(),
                "more_body": True,
            }
        )
        if between is not None and is_text_delta((name, data)) and deltas < last_delta:
            await between(deltas)
        deltas += is_text_delta((name, data))
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n" if events[0][0] is None else b""})


async def _respond(send: Send, code: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send_answer(send, code, body, [(b"content-length", str(len(body)).encode())])


def provider_model(
    base_url: str,
    protocol: Protocol,
    model_name: str | None = None,
    *,
    settings: ModelSettings | None = None,
    api_key: str = DUMMY_KEY,
) -> Model:
    """Pydantic-ai's real model for ``protocol`` with its real provider at ``base_url`` and a dummy key."""
    if protocol == "anthropic":
        # The Anthropic SDK appends /v1/messages to its base URL.
        root = base_url.removesuffix("/v1")
        return AnthropicModel(
            model_name or "claude-sonnet-5-5",
            provider=AnthropicProvider(api_key=api_key, base_url=root),
            settings=settings,
        )
    provider = OpenAIProvider(base_url=base_url, api_key=api_key)
    if protocol == "openai-chat":
        return OpenAIChatModel(model_name or "gpt-5.5", provider=provider, settings=settings)
    return OpenAIResponsesModel(model_name or "gpt-6.1-sol", provider=provider, settings=settings)


@contextlib.asynccontextmanager
async def serve_provider() -> AsyncIterator[ProviderServer]:
    """A provider speaking all three protocols on a free loopback port, for the block's duration."""
    running: ProviderServer | None = None

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
        elif running is not None:
            await running(scope, receive, send)

    async with serve_asgi(app) as served:
        running = ProviderServer(served.url.rstrip("/") + "/v1")
        try:
            yield running
        finally:
            # A hanging request must not hold up the server's shutdown.
            running._closing.set()
