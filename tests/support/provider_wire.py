"""What a model provider's answer looks like on the wire, in each protocol the test provider
speaks: whole, streamed as server-sent events, and as an error."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "PROTOCOLS",
    "Event",
    "Protocol",
    "Text",
    "ToolCall",
    "answer_of",
    "error_body",
    "is_text_delta",
    "pieces",
    "stream_of",
]

Protocol = Literal["openai-chat", "openai-responses", "anthropic"]
PROTOCOLS: tuple[Protocol, ...] = ("openai-chat", "openai-responses", "anthropic")

Event = tuple[str | None, dict[str, Any]]
"""One server-sent event: its name (None: unnamed) and its data."""


@dataclass(frozen=True)
class Text:
    """The model answers with text and ends its turn."""

    text: str
    pieces: tuple[str, ...] = ()
    """Streamed, the text's deltas, in order (they join to ``text``); none: one delta."""
    between: Callable[[int], Awaitable[None]] | None = field(default=None, compare=False)
    """Streamed, awaited after each delta but the last (given its index): what the test waits for
    before the provider writes on (a draft shown, say)."""


@dataclass(frozen=True)
class ToolCall:
    """The model calls one or more tools: ``(name, arguments)`` pairs."""

    calls: tuple[tuple[str, dict[str, Any]], ...]


def answer_of(protocol: Protocol, n: int, model: str, step: Text | ToolCall) -> dict[str, Any]:
    """The ``n``-th answer of ``model`` in ``protocol``: ``step``'s text or tool calls."""
    if protocol == "openai-chat":
        return _chat_answer(n, model, step)
    if protocol == "openai-responses":
        return _responses_answer(n, model, step)
    return _anthropic_answer(n, model, step)


def pieces(
    parts: list[str] | tuple[str, ...], *, between: Callable[[int], Awaitable[None]] | None = None
) -> Text:
    """Text streamed as the deltas ``parts``, as a provider sends a reply while the model writes it."""
    return Text("".join(parts), tuple(parts), between)


def stream_of(protocol: Protocol, answer: dict[str, Any], deltas: tuple[str, ...] = ()) -> list[Event]:
    """``answer`` as the events of a streamed answer in ``protocol``; its text in ``deltas`` if given."""
    events = _STREAMERS[protocol](answer)
    if not deltas:
        return events
    split: list[Event] = []
    for event in events:
        if is_text_delta(event):
            split += [_with_delta(event, delta) for delta in deltas]
        else:
            split.append(event)
    return split


def is_text_delta(event: Event) -> bool:
    """Whether ``event`` carries a piece of the answer's text, in any of the protocols."""
    name, data = event
    if name is None:
        choices = data.get("choices") or [{}]
        return bool(choices[0].get("delta", {}).get("content"))
    if name == "response.output_text.delta":
        return True
    return name == "content_block_delta" and data["delta"].get("type") == "text_delta"


def _with_delta(event: Event, delta: str) -> Event:
    name, data = event
    if name is None:
        [choice] = data["choices"]
        return None, data | {"choices": [choice | {"delta": choice["delta"] | {"content": delta}}]}
    if name == "response.output_text.delta":
        return name, data | {"delta": delta}
    return name, data | {"delta": data["delta"] | {"text": delta}}


def error_body(protocol: Protocol, message: str) -> dict[str, Any]:
    """The provider's error body for ``message``."""
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


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


def _chat_stream(answer: dict[str, Any]) -> list[Event]:
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


def _responses_stream(answer: dict[str, Any]) -> list[Event]:
    events: list[Event] = []

    def event(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **fields}))

    event("response.created", response=answer | {"status": "in_progress", "output": []})
    for index, item in enumerate(answer["output"]):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            event("response.output_item.added", output_index=index, item=item | {"content": []})
            part = item["content"][0]
            in_part = at | {"content_index": 0}
            event("response.content_part.added", **in_part, part=part | {"text": ""})
            event("response.output_text.delta", **in_part, delta=part["text"], logprobs=[])
            event("response.output_text.done", **in_part, text=part["text"], logprobs=[])
            event("response.content_part.done", **in_part, part=part)
        else:
            event("response.output_item.added", output_index=index, item=item | {"arguments": ""})
            event("response.function_call_arguments.delta", **at, delta=item["arguments"])
            event(
                "response.function_call_arguments.done", **at, arguments=item["arguments"], name=item["name"]
            )
        event("response.output_item.done", output_index=index, item=item)
    event("response.completed", response=answer)
    return events


def _anthropic_stream(answer: dict[str, Any]) -> list[Event]:
    events: list[Event] = []

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


_STREAMERS: dict[Protocol, Callable[[dict[str, Any]], list[Event]]] = {
    "openai-chat": _chat_stream,
    "openai-responses": _responses_stream,
    "anthropic": _anthropic_stream,
}
