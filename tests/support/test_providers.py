"""The loopback model providers that the model-path tests rely on, run by pydantic-ai's real clients."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError, ModelRequestTimeout

from support.providers import DUMMY_KEY, PROTOCOLS, Protocol, hang, serve_provider, status, text, tool_call

pytestmark = pytest.mark.anyio


def _tool_result_of(protocol: Protocol, body: dict[str, Any]) -> str:
    """The text of the one tool result in a follow-up request, as each protocol carries it."""
    if protocol == "openai-chat":
        [message] = [m for m in body["messages"] if m["role"] == "tool"]
        return str(message["content"])
    if protocol == "openai-responses":
        [item] = [i for i in body["input"] if i.get("type") == "function_call_output"]
        return str(item["output"])
    [block] = [
        b
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    content = block["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_tool_call_round_trips_through_the_real_client(protocol: Protocol) -> None:
    async with serve_provider() as provider:
        provider.script(tool_call("add", {"a": 2, "b": 3}), text("it is 5"))
        agent = Agent(provider.model(protocol), instructions="You add numbers.")

        @agent.tool_plain
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        with anyio.fail_after(30):
            result = await agent.run("what is 2 + 3?")

    assert result.output == "it is 5"
    first, second = provider.requests
    assert {r.protocol for r in provider.requests} == {protocol}
    assert first.tool_names == ["add"]
    [tool] = first.tools
    assert tool["description"] == "Add two integers."
    assert tool["parameters"]["properties"].keys() == {"a", "b"}
    assert "You add numbers." in first.instructions
    assert "what is 2 + 3?" in json.dumps(first.body)
    assert _tool_result_of(protocol, second.body) == "5"
    key_header = first.headers.get("x-api-key") or first.headers.get("authorization", "")
    assert DUMMY_KEY in key_header


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_hang_lasts_until_the_client_gives_up(protocol: Protocol) -> None:
    async with serve_provider() as provider:
        step = hang()
        provider.script(step)
        model = provider.model(protocol, settings={"request_timeout": 0.5, "max_retries": 0})
        with anyio.fail_after(30), pytest.raises(ModelRequestTimeout):
            await Agent(model).run("hello")
        with anyio.fail_after(10):
            await step.disconnected.wait()
    assert step.reached.is_set()
    assert not step.released.is_set()


async def test_a_released_hang_answers_with_its_next_step() -> None:
    async with serve_provider() as provider:
        step = hang(text("late but here"))
        provider.script(step)
        async with anyio.create_task_group() as tg:
            results: list[str] = []

            async def run() -> None:
                results.append((await Agent(provider.model("openai-chat")).run("hello")).output)

            tg.start_soon(run)
            with anyio.fail_after(10):
                await step.reached.wait()
            assert results == []
            step.release()
    assert results == ["late but here"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_error_status_reaches_the_client_with_its_message(protocol: Protocol) -> None:
    async with serve_provider() as provider:
        provider.script(status(400, "tools[0] is invalid"))
        model = provider.model(protocol, settings={"max_retries": 0})
        with anyio.fail_after(30), pytest.raises(ModelHTTPError) as caught:
            await Agent(model).run("hello")
    assert caught.value.status_code == 400
    assert "tools[0] is invalid" in str(caught.value.body)
    assert len(provider.requests) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_streamed_tool_call_round_trips_through_the_real_client(protocol: Protocol) -> None:
    async with serve_provider() as provider:
        provider.script(tool_call("add", {"a": 4, "b": 5}), text("it is 9"))
        agent = Agent(provider.model(protocol))

        @agent.tool_plain
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        with anyio.fail_after(30):
            async with agent.run_stream("what is 4 + 5?") as streamed:
                output = await streamed.get_output()

    assert output == "it is 9"
    assert [r.body.get("stream") for r in provider.requests] == [True, True]
    assert _tool_result_of(protocol, provider.requests[1].body) == "9"
