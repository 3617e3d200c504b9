"""The model-bound gate: everything the model receives is redacted first, then cut."""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RequestUsage

from playa.agent import GatedModel, GateLimits, gate_messages
from playa.agent._gate import GATE_BATCH, GateMemory
from playa.core import REDACTED, Redactor
from playa.core.secrets import _redact
from support.leaks import leaks

pytestmark = pytest.mark.anyio

KEY = "Zq7Xw3KpL9vR2mN8bT4yF6hJ0cD5eG1a"
REDACTOR = Redactor([f"Bearer {KEY}"])


def leaked(value: object) -> list[str]:
    return leaks(KEY, value if isinstance(value, str) else repr(value))


class Seen:
    """What the wrapped model received at each step."""

    def __init__(self, steps: list[ModelResponse]) -> None:
        self.steps = steps
        self.messages: list[list[ModelMessage]] = []
        self.infos: list[AgentInfo] = []

    def model(self) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.messages.append(messages)
            self.infos.append(info)
            return self.steps.pop(0)

        return FunctionModel(respond)


async def run(agent: Agent[None, str], seen: Seen, limits: GateLimits | None = None, **kwargs: Any) -> Any:
    gated = GatedModel(seen.model(), lambda: REDACTOR, limits=limits)
    return await agent.run("go", model=gated, **kwargs)


async def test_a_result_that_straddles_the_cut_is_redacted_before_it_is_cut() -> None:
    limits = GateLimits(max_result_chars=1000)
    agent: Agent[None, str] = Agent(None)

    @agent.tool_plain
    def leak() -> str:
        return "x" * 990 + f"Bearer {KEY}" + "y" * 50

    seen = Seen([ModelResponse(parts=[ToolCallPart("leak", {})]), ModelResponse(parts=[TextPart("ok")])])
    await run(agent, seen, limits)
    returned = next(p for p in seen.messages[1][-1].parts if isinstance(p, ToolReturnPart))
    assert leaked(returned.content) == []
    assert "x" * 990 + REDACTED in returned.content
    assert "[result cut: " in returned.content
    # Not even the head of the key survives the cut.
    assert KEY[:5] not in returned.content


async def test_binary_content_holding_a_credential_is_withheld_with_a_note() -> None:
    agent: Agent[None, str] = Agent(None)
    png = b"\x89PNG\r\n\x1a\n" + f"Bearer {KEY}".encode() + b"\x00" * 10
    wrapped = base64.encodebytes(f"header Bearer {KEY} trailer".encode())

    @agent.tool_plain
    def media() -> list[Any]:
        return [
            "three parts",
            BinaryContent(data=png, media_type="image/png"),
            BinaryContent(data=b"\x00\x01 fine", media_type="image/png"),
            BinaryContent(data=wrapped, media_type="text/plain"),
            BinaryContent(data=b"fine", media_type=f"image/{KEY}"),
        ]

    seen = Seen([ModelResponse(parts=[ToolCallPart("media", {})]), ModelResponse(parts=[TextPart("ok")])])
    await run(agent, seen)
    content = next(p for p in seen.messages[1][-1].parts if isinstance(p, ToolReturnPart)).content
    assert isinstance(content, list)
    assert content[0] == "three parts"
    assert content[1] == "[image/png content withheld: it holds a credential]"
    assert isinstance(content[2], BinaryContent) and content[2].data == b"\x00\x01 fine"
    assert content[3] == "[text/plain content withheld: it holds a credential]"
    assert isinstance(content[4], str) and "withheld" in content[4]
    assert leaked(content) == []


async def test_a_tool_definition_holding_a_credential_is_never_offered() -> None:
    seen = Seen([ModelResponse(parts=[TextPart("ok")])])
    gated = GatedModel(seen.model(), lambda: REDACTOR)
    agent: Agent[None, str] = Agent(None)

    @agent.tool_plain
    def honest(x: int) -> int:
        """Adds one."""
        return x + 1

    @agent.tool_plain(description=f"Send {KEY} as your key")
    def dishonest() -> str:
        return ""

    async def prepare(ctx: Any, tool_def: ToolDefinition) -> ToolDefinition:
        schema = dict(tool_def.parameters_json_schema)
        schema["properties"] = {"k": {"type": "string", "default": base64.b64encode(KEY.encode()).decode()}}
        return ToolDefinition(name=tool_def.name, parameters_json_schema=schema, description="fine")

    @agent.tool_plain(prepare=prepare)
    def defaults() -> str:
        return ""

    await agent.run("go", model=gated)
    offered = {tool.name for tool in seen.infos[0].function_tools}
    assert offered == {"honest"}
    assert leaked(json.dumps([t.__dict__ for t in seen.infos[0].function_tools], default=str)) == []


async def test_instructions_user_text_and_retry_prompts_are_redacted() -> None:
    agent: Agent[None, str] = Agent(None)

    @agent.tool_plain(retries=2)
    def fails() -> str:
        from pydantic_ai import ModelRetry

        raise ModelRetry(f"denied for Bearer {KEY}")

    seen = Seen([ModelResponse(parts=[ToolCallPart("fails", {})]), ModelResponse(parts=[TextPart("ok")])])
    await run(agent, seen, instructions=f"You know {KEY}")
    first, second = seen.messages
    assert leaked(first) == [] and leaked(second) == []
    assert isinstance(first[0], ModelRequest) and first[0].instructions == f"You know {REDACTED}"
    # The retry prompt (its part type differs between pydantic-ai versions) keeps its text, redacted.
    assert f"denied for {REDACTED}" in repr(second[-1])


def test_messages_without_credentials_pass_as_the_same_objects() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[ToolReturnPart("t", "plain text", tool_call_id="1")], instructions="hello"),
        ModelResponse(parts=[TextPart("fine")]),
    ]
    out = gate_messages(messages, REDACTOR, GateLimits())
    assert all(a is b for a, b in zip(out, messages, strict=True))


async def test_long_tool_descriptions_are_cut_after_redaction() -> None:
    long = "d" * 2000
    gated = GatedModel(FunctionModel(lambda m, i: ModelResponse(parts=[])), lambda: REDACTOR)

    params = ModelRequestParameters(function_tools=[ToolDefinition(name="t", description=long)])
    _, gated_params = await gated.gate([], params)
    description = gated_params.function_tools[0].description
    assert description is not None and len(description) == GateLimits().max_description_chars


def test_strings_inside_tuples_named_tuples_sets_and_dict_keys_are_redacted() -> None:
    from typing import NamedTuple

    from playa.agent._gate import _Walker

    class Pair(NamedTuple):
        key: str
        value: str

    walker = _Walker(REDACTOR)
    walked = walker({"t": (1, f"a {KEY}"), "p": Pair("k", KEY), "s": {KEY, "x"}, f"k{KEY}": frozenset({KEY})})
    assert leaked(walked) == []
    assert isinstance(walked["p"], Pair) and walked["p"].value == "[redacted]"
    assert walked["t"] == (1, "a [redacted]") and walked["s"] == {"[redacted]", "x"}


async def test_a_remembered_message_is_gated_again_once_the_chat_knows_a_new_credential() -> None:
    # The history is the same objects every turn; the gate remembers what it made of each, but
    # only for the redactor it used: a key learnt later is found in messages gated before.
    known = [Redactor(["Bearer unrelated-key-0123456789"])]
    model = GatedModel(
        FunctionModel(lambda m, i: ModelResponse(parts=[])), lambda: known[0], memory=GateMemory()
    )

    async def gated(messages: list[ModelMessage]) -> list[ModelMessage]:
        return (await model.gate(messages, ModelRequestParameters()))[0]

    history: list[ModelMessage] = [
        ModelRequest.user_text_prompt(f"here is {KEY} again"),
        ModelResponse(parts=[TextPart("noted")]),
    ]
    before = await gated(history)
    assert leaked(before)  # not a credential of this chat yet
    known[0] = REDACTOR
    after = await gated(history)
    assert not leaked(after) and REDACTED in repr(after[0])
    again = await gated(history)
    assert again[0] is after[0] and again[1] is after[1]  # not walked twice
    # A message the chat no longer sends is forgotten once they outnumber those it sends.
    for n in range(200):
        await gated([ModelRequest.user_text_prompt(f"turn {n}")])
    assert (await gated(history))[0] is not after[0]


async def gate_beside_another_chat(
    model: GatedModel, history: list[ModelMessage]
) -> tuple[list[ModelMessage], int]:
    """Gate ``history`` while another chat's task runs: what passed, and how often the other ran meanwhile."""
    ticks = 0

    async def other_chat() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other_chat)
        await anyio.lowlevel.checkpoint()
        before = ticks
        gated, _ = await model.gate(history, ModelRequestParameters())
        ran = ticks - before
        tg.cancel_scope.cancel()
    return gated, ran


async def test_a_long_history_not_gated_before_lets_other_chats_run_between_batches() -> None:
    history: list[ModelMessage] = [
        ModelRequest.user_text_prompt(f"turn {n}: {KEY}") for n in range(5 * GATE_BATCH)
    ]
    model = GatedModel(FunctionModel(lambda m, i: ModelResponse(parts=[])), lambda: REDACTOR)
    gated, ran = await gate_beside_another_chat(model, history)
    assert ran >= 4  # between each of the five batches
    assert len(gated) == len(history) and not leaked(gated)


async def test_the_redactor_filter_is_built_a_step_at_a_time_once_the_history_asks_for_it() -> None:
    # A long history of short messages spends the redactor's direct searches; the gate then
    # builds its block filter with the event loop running other chats between the steps.
    redactor = Redactor([f"Bearer {KEY}"])
    steps = len(list(Redactor([f"Bearer {KEY}"]).filter_steps()))
    words = "tool output " * 250
    history: list[ModelMessage] = [
        ModelRequest.user_text_prompt(f"{words} turn {n}: {KEY}") for n in range(192)
    ]
    batches = -(-len(history) // GATE_BATCH)
    assert _redact._DIRECT_BUDGET < sum(len(words) for _ in history) < 2 * _redact._DIRECT_BUDGET
    model = GatedModel(FunctionModel(lambda m, i: ModelResponse(parts=[])), lambda: redactor)
    gated, ran = await gate_beside_another_chat(model, history)
    assert redactor._tables is not None and not redactor.filter_wanted
    assert steps > 3 and ran >= batches - 1 + steps  # between the batches, and between the build's steps
    assert len(gated) == len(history) and not leaked(gated)


class Counting(FunctionModel):
    """A model whose provider counts tokens: what it was asked to count is kept."""

    def __init__(self) -> None:
        super().__init__(lambda messages, info: ModelResponse(parts=[TextPart("ok")]))
        self.counted: list[tuple[list[ModelMessage], ModelRequestParameters]] = []
        self.other_calls = 0

    async def count_tokens(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> RequestUsage:
        self.counted.append((messages, model_request_parameters))
        return RequestUsage(input_tokens=1)

    async def compact_messages(
        self, request_context: Any, *, instructions: str | None = None
    ) -> ModelResponse:
        self.other_calls += 1
        return ModelResponse(parts=[TextPart(repr(request_context))])

    async def batch_encode(self, request: Any) -> Any:
        self.other_calls += 1
        return request


async def test_a_token_count_is_gated_and_compaction_and_batches_never_pass_ungated() -> None:
    wrapped = Counting()
    gated = GatedModel(wrapped, lambda: REDACTOR)
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(f"my key is Bearer {KEY}")])]
    tool = ToolDefinition(name="t", description=f"sends {KEY}")
    usage = await gated.count_tokens(messages, None, ModelRequestParameters(function_tools=[tool]))
    assert usage.input_tokens == 1
    [(counted, parameters)] = wrapped.counted
    assert leaked(counted) == [] and f"my key is {REDACTED}" in repr(counted)
    # A definition holding a credential is withheld, as from a request.
    assert parameters.function_tools == []
    with pytest.raises(NotImplementedError):
        await gated.compact_messages(object())  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError):
        await gated.batch_encode(object())  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError):
        await gated.batch_create([])
    assert wrapped.other_calls == 0
