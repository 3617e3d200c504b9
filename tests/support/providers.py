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
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings
from starlette.types import Receive, Scope, Send

from servers.python_servers import buffered, json_or_none, serve_asgi

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

Protocol = Literal["openai-chat", "openai-responses", "anthropic"]
PROTOCOLS: tuple[Protocol, ...] = ("openai-chat", "openai-responses", "anthropic")

DUMMY_KEY = "test-provider-key"
_PATHS: dict[str, Protocol] = {
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
    "/v1/messages": "anthropic",
}


@dataclass(frozen=True)
class Text:
    """The model answers with text and ends its turn."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """The model calls one or more tools: ``(name, arguments)`` pairs."""

    calls: tuple[tuple[str, dict[str, Any]], ...]


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
            await _respond(send, step.code, _error_body(protocol, step))
            return
        answer = self._answer(protocol, request.body, step)
        if request.body.get("stream"):
            await _respond_stream(send, _STREAMERS[protocol](answer))
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

    def _answer(self, protocol: Protocol, body: dict[str, Any], step: Text | ToolCall) -> dict[str, Any]:
        n = next(self._ids)
        model = str(body.get("model") or "test-model")
        if protocol == "openai-chat":
            return _chat_answer(n, model, step)
        if protocol == "openai-responses":
            return _responses_answer(n, model, step)
        return _anthropic_answer(n, model, step)


def _chat_answer(n: int, model: str, step: Text | ToolCall) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if isinstance(step, Text):
        message["content"] = step.text
        finish = "stop"
    else:
        message["tool_calls"] = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(step.calls)
        ]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _responses_answer(n: int, model: str, step: Text | ToolCall) -> dict[str, Any]:
    output: list[dict[str, Any]]
    if isinstance(step, Text):
        output = [
            {
                "type": "message",
                "id": f"msg_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": step.text, "annotations": []}],
            }
        ]
    else:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for i, (name, args) in enumerate(step.calls)
        ]
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _anthropic_answer(n: int, model: str, step: Text | ToolCall) -> dict[str, Any]:
    content: list[dict[str, Any]]
    if isinstance(step, Text):
        content = [{"type": "text", "text": step.text}]
        stop = "end_turn"
    else:
        content = [
            {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
            for i, (name, args) in enumerate(step.calls)
        ]
        stop = "tool_use"
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _chat_stream(answer: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    [choice] = answer["choices"]
    message = choice["message"]
    head = {key: answer[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    if message["content"]:
        events.append(chunk({"content": message["content"]}))
    for index, call in enumerate(message.get("tool_calls", [])):
        events.append(chunk({"tool_calls": [call | {"index": index}]}))
    events.append(chunk({}, choice["finish_reason"]))
    events.append((None, head | {"choices": [], "usage": answer["usage"]}))
    return events


def _responses_stream(answer: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    events: list[tuple[str | None, dict[str, Any]]] = []

    def event(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **fields}))

    event("response.created", response=answer | {"status": "in_progress", "output": []})
    for index, item in enumerate(answer["output"]):
        if item["type"] == "message":
            event("response.output_item.added", output_index=index, item=item | {"content": []})
            part = item["content"][0]
            event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part | {"text": ""},
            )
            event(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                delta=part["text"],
                logprobs=[],
            )
            event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=part["text"],
                logprobs=[],
            )
            event(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
        else:
            event("response.output_item.added", output_index=index, item=item | {"arguments": ""})
            event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            )
            event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
                name=item["name"],
            )
        event("response.output_item.done", output_index=index, item=item)
    event("response.completed", response=answer)
    return events


def _anthropic_stream(answer: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    events: list[tuple[str | None, dict[str, Any]]] = []

    def event(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, **fields}))

    start = answer | {"content": [], "stop_reason": None, "usage": answer["usage"] | {"output_tokens": 0}}
    event("message_start", message=start)
    for index, block in enumerate(answer["content"]):
        if block["type"] == "text":
            event("content_block_start", index=index, content_block={"type": "text", "text": ""})
            event("content_block_delta", index=index, delta={"type": "text_delta", "text": block["text"]})
        else:
            event("content_block_start", index=index, content_block=block | {"input": {}})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            event("content_block_delta", index=index, delta=delta)
        event("content_block_stop", index=index)
    event(
        "message_delta",
        delta={"stop_reason": answer["stop_reason"], "stop_sequence": None},
        usage={"output_tokens": answer["usage"]["output_tokens"]},
    )
    event("message_stop")
    return events


_STREAMERS = {
    "openai-chat": _chat_stream,
    "openai-responses": _responses_stream,
    "anthropic": _anthropic_stream,
}


async def _respond_stream(send: Send, events: list[tuple[str | None, dict[str, Any]]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        await send(
            {
                "type": "http.response.body",
                "body": f"{head}data: {json.dumps(data)}\n\n".encode(),
                "more_body": True,
            }
        )
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n" if events[0][0] is None else b""})


def _error_body(protocol: Protocol, step: Status) -> dict[str, Any]:
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": step.message}}
    return {"error": {"message": step.message, "type": "invalid_request_error", "param": None, "code": None}}


async def _respond(send: Send, code: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": code,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
            model_name or "claude-sonnet-4-5",
            provider=AnthropicProvider(api_key=api_key, base_url=root),
            settings=settings,
        )
    provider = OpenAIProvider(base_url=base_url, api_key=api_key)
    if protocol == "openai-chat":
        return OpenAIChatModel(model_name or "gpt-5", provider=provider, settings=settings)
    return OpenAIResponsesModel(model_name or "gpt-5", provider=provider, settings=settings)


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
