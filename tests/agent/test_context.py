"""A context that never overflows: the latest whole turns that fit the budget are sent, the rest stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from playa.agent import ContextBudget, History, HostConfig, Reply
from playa.agent._context import BYTES_PER_TOKEN, latest_turns
from playa.exceptions import ConfigError
from support.chat import ScriptedUI, msg
from support.host import new_host
from support.providers import PROTOCOLS, Protocol, provider_model, serve_provider, text

pytestmark = pytest.mark.anyio


def turn(i: int, *, result: str = "a.txt b.txt") -> list[ModelMessage]:
    """One stored turn: the person's message, a tool call, its result, the answer."""
    call_id = f"call-{i}"
    return [
        ModelRequest(parts=[UserPromptPart(f"question {i}: what is in the workspace?")]),
        ModelResponse(parts=[ToolCallPart("list_files", {"path": "."}, tool_call_id=call_id)]),
        ModelRequest(parts=[ToolReturnPart("list_files", result, tool_call_id=call_id)]),
        ModelResponse(parts=[TextPart(f"answer {i}: two files")]),
    ]


def sizes_of(messages: list[ModelMessage]) -> list[int]:
    history = History(Path("/nonexistent/history.jsonl"), messages)
    return list(history.sized()[1])


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def test_a_history_that_fits_is_sent_whole_without_a_note() -> None:
    messages = [m for i in range(3) for m in turn(i)]
    window = latest_turns(messages, sizes_of(messages), 100_000)
    assert window.left_out == 0
    assert window.messages == messages


def test_the_oldest_turns_are_left_out_whole_with_a_note_in_their_place() -> None:
    messages = [m for i in range(50) for m in turn(i)]
    sizes = sizes_of(messages)
    per_turn = sum(sizes[:4])
    # Room for three turns and a bit: the fourth does not fit whole, so it is left out whole.
    window = latest_turns(messages, sizes, (per_turn * 3 + per_turn // 2) // BYTES_PER_TOKEN)
    assert window.left_out == 47 * 4
    kept = window.messages
    assert len(kept) == 12
    assert kept[1:] == messages[-11:]
    [note, first] = kept[0].parts
    assert isinstance(note, UserPromptPart) and "Earlier conversation left out: 188 older messages" in str(
        note.content
    )
    assert prompts(kept)[1:] == [f"question {i}: what is in the workspace?" for i in (47, 48, 49)]
    # Every tool call is sent with its result.
    calls = {p.tool_call_id for m in kept for p in m.parts if isinstance(p, ToolCallPart)}
    results = {p.tool_call_id for m in kept for p in m.parts if isinstance(p, ToolReturnPart)}
    assert calls == results == {"call-47", "call-48", "call-49"}
    # The stored message is not changed by the note.
    assert messages[-12].parts == [first]


def test_a_last_turn_too_big_for_the_budget_leaves_only_the_note() -> None:
    messages = turn(0) + turn(1, result="x" * 50_000)
    window = latest_turns(messages, sizes_of(messages), 2_000)
    assert window.left_out == 8
    [only] = window.messages
    assert isinstance(only, ModelRequest) and "8 older messages" in prompts([only])[0]


def test_an_empty_history_is_an_empty_window() -> None:
    assert latest_turns([], [], 1_000).messages == []


def test_the_budget_is_the_known_window_capped_by_the_setting() -> None:
    known = provider_model("http://127.0.0.1:9/v1", "anthropic")
    window = known.context_window
    assert window is not None and window >= 200_000
    assert ContextBudget.for_model(known).tokens == window
    assert ContextBudget.for_model(known, 50_000).tokens == 50_000
    assert ContextBudget.for_model(known, 10 * window).tokens == window
    unknown = provider_model("http://127.0.0.1:9/v1", "openai-chat", "a-local-model-nobody-knows")
    assert unknown.context_window is None
    assert ContextBudget.for_model(unknown).tokens == 32_000
    assert ContextBudget.for_model(unknown, 8_000).tokens == 8_000
    with pytest.raises(ConfigError, match="at least 1,000 tokens"):
        HostConfig(data_dir=Path("/nonexistent"), context_tokens=500)


def _tool_pairs(protocol: Protocol, body: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The ids of the tool calls and of the tool results in a request body."""
    calls: set[str] = set()
    results: set[str] = set()
    if protocol == "openai-chat":
        for message in body["messages"]:
            calls.update(call["id"] for call in message.get("tool_calls") or [])
            if message["role"] == "tool":
                results.add(message["tool_call_id"])
    elif protocol == "openai-responses":
        for item in body["input"]:
            if item.get("type") == "function_call":
                calls.add(item["call_id"])
            elif item.get("type") == "function_call_output":
                results.add(item["call_id"])
    else:
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_use":
                    calls.add(block["id"])
                elif block.get("type") == "tool_result":
                    results.add(block["tool_use_id"])
    return calls, results


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_at_a_thousand_turns_the_request_stays_within_the_budget_and_the_history_keeps_all(
    data_dir: Path, protocol: Protocol
) -> None:
    budget = 8_000
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model(protocol), context_tokens=budget) as host,
    ):
        session = await host.session("console:t", owner="owner")
        await host.history(session).extend([m for i in range(1_000) for m in turn(i)])
        provider.script(text("turn 1000 answered"), text("after the reset"))
        with anyio.fail_after(30):
            reply = await host.handle(session, msg("and now?"), ScriptedUI())
        assert reply == Reply("turn 1000 answered", "agent")
        [request] = provider.requests
        assert len(request.raw) <= budget * BYTES_PER_TOKEN
        sent = request.raw.decode()
        assert "Earlier conversation left out" in sent
        assert "question 999:" in sent and "answer 999: two files" in sent and "and now?" in sent
        assert "question 0:" not in sent and "question 900:" not in sent
        calls, results = _tool_pairs(protocol, request.body)
        assert calls and calls == results
        assert len(host.history(session)) == 4_000 + 2

        # The stored history is the whole chat; /reset still forgets it.
        reloaded = await History.open(host.history(session).path.parent)
        assert len(reloaded) == 4_002
        await host.handle(session, msg("/reset"), ScriptedUI())
        with anyio.fail_after(30):
            await host.handle(session, msg("fresh"), ScriptedUI())
        after = provider.requests[1].raw.decode()
        assert "Earlier conversation left out" not in after and "question 999" not in after


async def test_the_request_size_does_not_grow_with_the_history(data_dir: Path) -> None:
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model("openai-chat"), context_tokens=4_000) as host,
    ):
        session = await host.session("console:t", owner="owner")
        sizes: list[int] = []
        for count in (100, 900):
            await host.history(session).extend([m for i in range(count) for m in turn(i)])
            provider.script(text("ok"))
            with anyio.fail_after(30):
                await host.handle(session, msg("next"), ScriptedUI())
            sizes.append(len(provider.requests[-1].raw))
        messages = [json.dumps(m) for m in provider.requests[-1].body["messages"]]
        assert len(messages) > 4
        assert abs(sizes[0] - sizes[1]) < 400, sizes
