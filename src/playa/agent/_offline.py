"""The offline model: deterministic, no network, and honest about being no LLM."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

__all__ = ["LABEL", "is_offline", "offline_model"]

LABEL = "[offline model]"


def offline_model() -> FunctionModel:
    """A model that calls the tool named in the message, or says what it has.

    ``server__tool {"a": 1}`` (or the tool's name alone) calls that tool if it is active and
    answers with the result exactly as the model received it; anything else is answered with
    the active tools and the prompt sections.
    """
    return FunctionModel(_respond, model_name="offline")


def is_offline(model: object) -> bool:
    """Whether ``model`` is the offline model, which calls tools by name and so is offered all of them."""
    return isinstance(model, FunctionModel) and model.function is _respond


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    response = _reply(messages, info)
    # No tokens are read or written. Left empty, the usage would be estimated over every
    # message of the request at every step, a cost that grows with the history's window.
    response.usage = RequestUsage(unmeasured_requests=1)
    return response


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest):
        results = [p for p in last.parts if isinstance(p, ToolReturnPart | RetryPromptPart)]
        if results:
            return ModelResponse(parts=[TextPart("\n\n".join(_describe_result(p) for p in results))])
        prompt = next((p for p in reversed(last.parts) if isinstance(p, UserPromptPart)), None)
        if prompt is not None and isinstance(prompt.content, str):
            return _answer(prompt.content, info)
        if prompt is not None:  # text with images the person sent: the text is the answer's
            return _answer("\n".join(c for c in prompt.content if isinstance(c, str)), info)
    return ModelResponse(parts=[TextPart(f"{LABEL} I have nothing to answer.")])


def _describe_result(part: ToolReturnPart | RetryPromptPart) -> str:
    if isinstance(part, RetryPromptPart):
        return f"{LABEL} {part.tool_name} could not be called:\n{part.model_response()}"
    status = "failed" if part.outcome != "success" else "returned"
    text = part.model_response_str(wrap_if_error=False)
    files = [f"[{getattr(f, 'media_type', 'file')} attached]" for f in part.files]
    return f"{LABEL} {part.tool_name} {status}:\n" + "\n".join([text, *files]).strip()


def _answer(text: str, info: AgentInfo) -> ModelResponse:
    tools = {tool.name for tool in info.function_tools}
    name, _, rest = text.strip().partition(" ")
    if name in tools:
        arguments: Any = {}
        if rest.strip():
            try:
                arguments = json.loads(rest)
            except json.JSONDecodeError as exc:
                return _text(
                    f'the arguments for {name} are not valid JSON ({exc.msg}). Example: {name} {{"key": 1}}'
                )
            if not isinstance(arguments, dict):
                return _text(f'the arguments for {name} must be a JSON object, like {name} {{"key": 1}}')
        return ModelResponse(parts=[ToolCallPart(tool_name=name, args=arguments)])
    return _text(_overview(info))


def _text(message: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"{LABEL} {message}")])


def _overview(info: AgentInfo) -> str:
    lines = [
        "I am Playa's offline model, not a language model: I call a tool you name, "
        'as `<tool> {"arg": "value"}`, and show what it returned.',
        "",
        "Active tools:",
    ]
    lines += [
        f"- {t.name}: {(t.description or '').splitlines()[0] if t.description else ''}".rstrip(": ")
        for t in sorted(info.function_tools, key=lambda t: t.name)
    ] or ["(none)"]
    if info.instructions:
        lines += ["", "My instructions say:", info.instructions]
    return "\n".join(lines)
