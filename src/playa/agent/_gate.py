"""The model-bound gate: the one place everything the model receives passes, redacted, then cut.

The host runs every agent turn through :class:`GatedModel`, a pydantic-ai model that wraps the
real one. Its ``request`` sees exactly what the provider client is about to send — the
instructions, every message of the history, every tool definition, every tool result and
error, every retry prompt, every binary part — and nothing is added after it. So protection
does not depend on each producer remembering to redact: a new kind of text reaching the model
passes here like every other.

What it does, in order:

1. Redact every string with the chat's redactor (every credential it knows, in every encoding
   the redactor knows), walking the messages' dataclasses generically, so parts and fields
   added by a later pydantic-ai are covered too.
2. Withhold, with a note in its place, any binary payload (image, audio, document bytes) or
   MIME type that holds a credential, since bytes cannot be redacted in place.
3. Withhold any tool definition (name, title, description, schema, defaults, enums) that
   holds a credential: the tool is not offered at all.
4. Only then cut what is too long: tool results and errors to ``max_result_chars``, tool
   descriptions to ``max_description_chars``. Cutting first would leave the head of a
   credential that straddles the cut.

Text unchanged by all of this is passed on as the very same objects, so a request without
credentials costs one scan of its text.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import anyio.lowlevel
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.batch import Batch, BatchRequest, EncodedBatchRequest
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.usage import RequestUsage

from ..core import Redactor, check_at_least

__all__ = ["GateLimits", "GateMemory", "GatedModel", "gate_messages"]

logger = logging.getLogger(__name__)

GATE_BATCH: Final = 16
"""Messages walked between two chances for the event loop to run others (~1.3 ms here)."""

_MAX_DEPTH: Final = 64


@dataclass(frozen=True, kw_only=True)
class GateLimits:
    """How much of a tool's output and description the model receives (characters)."""

    max_result_chars: int = 200_000
    max_description_chars: int = 1024

    def __post_init__(self) -> None:
        check_at_least(self, max_result_chars=1000, max_description_chars=10)


def withheld_note(media_type: str) -> str:
    return f"[{media_type if '/' in media_type and len(media_type) < 64 else 'binary'} content withheld: it holds a credential]"


class _Walker:
    """Redacts every string and withholds every credential-bearing binary in a structure."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.changed = 0

    def __call__(self, value: Any, depth: int = 0) -> Any:
        if isinstance(value, str):
            redacted = self.redactor.redact(value)
            if redacted is not value:
                self.changed += 1
            return redacted
        if depth > _MAX_DEPTH or value is None or isinstance(value, int | float | bool):
            return value
        if isinstance(value, BinaryContent):
            return self._binary(value)
        if isinstance(value, list):
            items = [self(item, depth + 1) for item in value]
            return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
        if isinstance(value, tuple):
            items = [self(item, depth + 1) for item in value]
            if not any(a is not b for a, b in zip(items, value, strict=True)):
                return value
            if hasattr(value, "_fields"):  # a named tuple
                return type(value)(*items)
            return tuple(items)
        if isinstance(value, set | frozenset):
            walked = {self(item, depth + 1) for item in value}
            return value if walked == value else type(value)(walked)
        if isinstance(value, dict):
            pairs = [(self(k, depth + 1), self(v, depth + 1)) for k, v in value.items()]
            if any(a is not k or b is not v for (a, b), (k, v) in zip(pairs, value.items(), strict=True)):
                return dict(pairs)
            return value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._dataclass(value, depth)
        return value

    def _binary(self, content: BinaryContent) -> BinaryContent | str:
        if self.holds_credential(content.data) or self.redactor.contains(content.media_type):
            self.changed += 1
            return withheld_note(self.redactor.redact(content.media_type))
        return content

    def holds_credential(self, data: bytes) -> bool:
        return self.redactor.contains_bytes(data)

    def _dataclass(self, value: Any, depth: int) -> Any:
        updates: dict[str, Any] = {}
        for item in dataclasses.fields(value):
            try:
                current = getattr(value, item.name)
            except AttributeError:
                continue
            new = self(current, depth + 1)
            if new is not current:
                if isinstance(current, BinaryContent) and isinstance(new, str):
                    new = BinaryContent(data=new.encode(), media_type="text/plain")
                updates[item.name] = new
        if not updates:
            return value
        clone = copy.copy(value)
        for name, new in updates.items():
            object.__setattr__(clone, name, new)
        return clone


def _cut(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[{what} cut: {len(text):,} characters; this is the first {limit:,}]"


def _cut_content(content: Any, limit: int) -> Any:
    if isinstance(content, str):
        return _cut(content, limit, "result")
    if isinstance(content, list):
        items = [_cut(item, limit, "result") if isinstance(item, str) else item for item in content]
        return items if any(a is not b for a, b in zip(items, content, strict=True)) else content
    return content


def _cut_results(messages: list[ModelMessage], limit: int) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            out.append(message)
            continue
        parts = []
        for part in message.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                content = _cut_content(part.content, limit)
                if content is not part.content:
                    part = copy.copy(part)
                    object.__setattr__(part, "content", content)
            parts.append(part)
        if any(a is not b for a, b in zip(parts, message.parts, strict=True)):
            message = copy.copy(message)
            object.__setattr__(message, "parts", parts)
        out.append(message)
    return out


def gate_messages(messages: list[ModelMessage], redactor: Redactor, limits: GateLimits) -> list[ModelMessage]:
    """``messages`` as the model may receive them (and the history may keep them): redacted, then cut."""
    walker = _Walker(redactor)
    gated = [_gate_one(message, walker, limits) for message in messages]
    if walker.changed:
        logger.info("the model gate redacted or withheld %d items", walker.changed)
    return gated


def _gate_one(message: ModelMessage, walker: _Walker, limits: GateLimits) -> ModelMessage:
    # With no credential to find, walking changes nothing: only the cut is left to do.
    walked: ModelMessage = walker(message) if walker.redactor else message
    return _cut_results([walked], limits.max_result_chars)[0]


def _definition_text(tool: ToolDefinition) -> str:
    # Every field a provider may send; asdict would deep-copy the schema first.
    fields = [getattr(tool, item.name) for item in dataclasses.fields(tool)]
    return json.dumps(fields, default=str, ensure_ascii=False)


class GateMemory:
    """The gate's verdicts, kept across a chat's turns: on each tool definition and each message.

    Definitions are reused while their tool does not change, and the history's messages are the
    same objects from one turn to the next, so a chat of thousands of tools or a long history
    pays for the scan once per definition or message and redactor, not once per model request.
    """

    def __init__(self) -> None:
        self._verdicts: dict[int, tuple[ToolDefinition, Redactor, ToolDefinition | None]] = {}
        self._messages: dict[int, tuple[ModelMessage, Redactor, ModelMessage]] = {}

    def passed(self, tool: ToolDefinition, redactor: Redactor, limits: GateLimits) -> ToolDefinition | None:
        """``tool`` as the model may see it (its description cut), or None when it holds a credential."""
        known = self._verdicts.get(id(tool))
        if known is not None and known[0] is tool and known[1] is redactor:
            return known[2]
        verdict: ToolDefinition | None = tool
        if redactor and redactor.contains(_definition_text(tool)):
            verdict = None
        elif tool.description is not None and len(tool.description) > limits.max_description_chars:
            verdict = dataclasses.replace(
                tool, description=tool.description[: limits.max_description_chars - 1] + "…"
            )
        self._verdicts[id(tool)] = (tool, redactor, verdict)
        return verdict

    def keep_only(self, tools: list[ToolDefinition]) -> None:
        """Forget the verdicts on definitions no longer offered, once they outnumber those offered."""
        if len(self._verdicts) > 2 * len(tools) + 64:
            current = {id(tool) for tool in tools}
            self._verdicts = {key: value for key, value in self._verdicts.items() if key in current}

    def message(self, message: ModelMessage, walker: _Walker, limits: GateLimits) -> ModelMessage:
        """``message`` gated by ``walker``'s redactor, walked only the first time it meets it."""
        known = self._messages.get(id(message))
        if known is not None and known[0] is message and known[1] is walker.redactor:
            return known[2]
        gated = _gate_one(message, walker, limits)
        self._messages[id(message)] = (message, walker.redactor, gated)
        return gated

    def keep_only_messages(self, messages: list[ModelMessage]) -> None:
        """Forget the messages no longer sent, once they outnumber those sent."""
        if len(self._messages) > 2 * len(messages) + 64:
            current = {id(message) for message in messages}
            self._messages = {key: value for key, value in self._messages.items() if key in current}


class GatedModel(WrapperModel):
    """Wraps a chat's model for one turn; every request passes :meth:`gate` first.

    ``redactor`` is asked at every request, so a credential learnt during the turn counts
    from the next model step on.
    """

    def __init__(
        self,
        wrapped: Model,
        redactor: Callable[[], Redactor],
        *,
        limits: GateLimits | None = None,
        memory: GateMemory | None = None,
    ) -> None:
        super().__init__(wrapped)
        self._redactor = redactor
        self.limits = limits or GateLimits()
        self._memory = memory or GateMemory()

    async def gate(
        self, messages: list[ModelMessage], parameters: ModelRequestParameters
    ) -> tuple[list[ModelMessage], ModelRequestParameters]:
        """What the model may receive of ``messages`` and ``parameters``: redacted, then cut.

        A long history not gated before (a chat's first turn, or its first since it learnt a
        credential) is walked :data:`GATE_BATCH` messages at a time, and the event loop runs
        other chats between the batches. So it does between the steps of building the
        redactor's block filter, once the redactor asks for it (``Redactor.filter_wanted``).
        """
        redactor = self._redactor()
        walker = _Walker(redactor)
        parameters = self._gate_parameters(parameters, walker)
        gated: list[ModelMessage] = []
        for start in range(0, len(messages), GATE_BATCH):
            if start:
                await anyio.lowlevel.checkpoint()
            if redactor.filter_wanted:
                for _ in redactor.filter_steps():
                    await anyio.lowlevel.checkpoint()
            gated += self.gate_batch(messages[start : start + GATE_BATCH], walker)
        self._memory.keep_only_messages(messages)
        if walker.changed:
            logger.info("the model gate redacted or withheld %d items", walker.changed)
        return gated, parameters

    def gate_batch(self, messages: list[ModelMessage], walker: _Walker) -> list[ModelMessage]:
        """One batch of a request's messages, gated (remembered ones are not walked again)."""
        return [self._memory.message(message, walker, self.limits) for message in messages]

    def _gate_parameters(self, parameters: ModelRequestParameters, walker: _Walker) -> ModelRequestParameters:
        tools: list[ToolDefinition] = []
        withheld: list[str] = []
        for tool in parameters.function_tools:
            passed = self._memory.passed(tool, walker.redactor, self.limits)
            if passed is None:
                withheld.append(walker.redactor.redact(tool.name))
            else:
                tools.append(passed)
        self._memory.keep_only(parameters.function_tools)
        if withheld:
            logger.warning("tool definitions withheld from the model, they hold a credential: %s", withheld)
        rest: ModelRequestParameters = walker(dataclasses.replace(parameters, function_tools=[]))
        return dataclasses.replace(rest, function_tools=tools)

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        messages, parameters = await self.gate(messages, model_request_parameters)
        return await self.wrapped.request(messages, model_settings, parameters)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        messages, parameters = await self.gate(messages, model_request_parameters)
        async with self.wrapped.request_stream(messages, model_settings, parameters, run_context) as stream:
            yield stream

    async def count_tokens(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> RequestUsage:
        """A provider's token count sends the request too: it is gated like one."""
        messages, parameters = await self.gate(messages, model_request_parameters)
        return await self.wrapped.count_tokens(messages, model_settings, parameters)

    # The other ways a wrapped model sends a chat's messages to its provider, which no Playa
    # turn uses, are refused rather than passed through ungated.

    async def compact_messages(
        self, request_context: ModelRequestContext, *, instructions: str | None = None
    ) -> ModelResponse:
        raise NotImplementedError("the model gate does not pass compaction requests")

    async def batch_encode(self, request: BatchRequest) -> EncodedBatchRequest:
        raise NotImplementedError("the model gate does not pass batch requests")

    async def batch_create(self, requests: Sequence[EncodedBatchRequest]) -> Batch:
        raise NotImplementedError("the model gate does not pass batch requests")
