from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelResponse

from playa.agent import Host
from playa.core import ToolResult, ToolResultEvent
from support.chat import ScriptedUI, msg
from support.host import new_host

pytestmark = pytest.mark.anyio


async def test_the_offline_model_calls_a_named_tool_and_reports_its_result(offline_host: Host) -> None:
    session = await offline_host.session("console:t", owner="o")
    reply = await offline_host.handle(
        session, msg('write_file {"path": "a.txt", "content": "hey"}'), ScriptedUI()
    )
    assert reply is not None
    assert reply.text == "[offline model] write_file returned:\nwrote 3 bytes to a.txt"
    reply = await offline_host.handle(session, msg("list_files"), ScriptedUI())
    assert reply is not None and reply.text.endswith("a.txt")


async def test_the_offline_model_reports_a_failed_call_as_failed(offline_host: Host) -> None:
    session = await offline_host.session("console:t", owner="o")
    reply = await offline_host.handle(session, msg('read_file {"path": "../etc"}'), ScriptedUI())
    assert reply is not None
    assert reply.text.startswith("[offline model] read_file failed:")
    assert "'..'" in reply.text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("read_file {bad", "the arguments for read_file are not valid JSON"),
        ("read_file [1, 2]", "the arguments for read_file must be a JSON object"),
    ],
)
async def test_malformed_arguments_get_a_clear_answer(offline_host: Host, text: str, expected: str) -> None:
    session = await offline_host.session("console:t", owner="o")
    reply = await offline_host.handle(session, msg(text), ScriptedUI())
    assert reply is not None and expected in reply.text


async def test_otherwise_it_says_what_it_is_and_lists_tools_and_sections(offline_host: Host) -> None:
    session = await offline_host.session("console:t", owner="o")
    session.prompt.set("Remote MCP servers", "demo: unavailable (connection refused)")
    reply = await offline_host.handle(session, msg("what can you do?"), ScriptedUI())
    assert reply is not None
    assert "offline model, not a language model" in reply.text
    assert "- read_file: Read a text file from your workspace." in reply.text
    assert "## Remote MCP servers\ndemo: unavailable (connection refused)" in reply.text


async def test_a_tool_name_not_active_is_not_called(offline_host: Host) -> None:
    session = await offline_host.session("console:t", owner="o")
    session.tools.deactivate("read_file")
    reply = await offline_host.handle(session, msg('read_file {"path": "x"}'), ScriptedUI())
    assert reply is not None and "Active tools" in reply.text and "- read_file" not in reply.text


async def test_the_offline_model_shows_the_result_after_hooks_rewrote_it(data_dir: object) -> None:
    from pathlib import Path

    from playa.core import Extension

    class Shout(Extension):
        id = "shout"

        async def on_tool_result(self, event: ToolResultEvent) -> None:
            event.result = ToolResult(event.result.text.upper())

    async with new_host(Path(str(data_dir)), extensions=[Shout()]) as host:
        session = await host.session("console:t", owner="o")
        reply = await host.handle(session, msg('write_file {"path": "a", "content": "x"}'), ScriptedUI())
    assert reply is not None and reply.text.endswith("WROTE 1 BYTES TO A")


async def test_the_offline_model_reads_no_tokens_and_invents_no_count(offline_host: Host) -> None:
    # An estimate would walk every message of the request at every step, for numbers nobody pays.
    session = await offline_host.session("console:t", owner="o")
    await offline_host.handle(session, msg("hello"), ScriptedUI())
    response = offline_host.history(session).messages[-1]
    assert isinstance(response, ModelResponse)
    assert response.usage.unmeasured_requests == 1
    assert (response.usage.input_tokens, response.usage.output_tokens) == (0, 0)
