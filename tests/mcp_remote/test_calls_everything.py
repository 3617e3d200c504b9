"""server-everything's task and progress tools, end to end through the host (npm)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from playa.mcp_remote import ConnectionSettings, HostSecret, RemoteMcpSettings
from servers.node import server_everything
from support.chat import RecordingModel, ScriptedUI
from support.progress import progress_done
from support.remote import OwnerChat, owner_chat

pytestmark = [pytest.mark.anyio, pytest.mark.npm]

RESEARCH = "everything__simulate-research-query"


@asynccontextmanager
async def everything_chat(
    data_dir: Path,
    secret: HostSecret,
    ui: ScriptedUI,
    model: RecordingModel | None = None,
    *,
    call_timeout: float = 15.0,
) -> AsyncIterator[OwnerChat]:
    """server-everything, added by the owner of a chat on a host that waits up to a minute for a task."""
    connection = ConnectionSettings(connect_timeout=15.0, call_timeout=call_timeout, call_max=60.0)
    settings = RemoteMcpSettings(connection=connection)
    async with (
        server_everything() as url,
        owner_chat(data_dir, secret, "console:everything", model, settings) as chat,
    ):
        added = await chat.command(f"/mcp_add everything {url}", ui)
        assert added.startswith("Added everything: connected")
        assert RESEARCH in added  # a task-only tool is offered: the host runs it as a task
        yield chat


async def shown_to_the_end(tmp_path: Path, secret: HostSecret, command: str) -> tuple[str, list[str]]:
    """``command`` in a chat with server-everything added, run until its progress is done: the
    reply, and the progress lines shown meanwhile."""
    ui = ScriptedUI()
    with anyio.fail_after(60):
        async with everything_chat(tmp_path, secret, ui) as chat:
            reply = await chat.command(command, ui)
            await progress_done(ui)
    return reply, [text for _, text in ui.progress_shown]


async def test_a_task_only_tool_runs_as_a_task_and_its_states_are_shown(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    reply, texts = await shown_to_the_end(tmp_path, host_secret, f'{RESEARCH} {{"topic": "tides"}}')
    assert reply.startswith(f"[offline model] {RESEARCH} returned:\n# Research Report: tides")
    assert f"{RESEARCH}: Gathering sources..." in texts
    assert texts[-1] == f"{RESEARCH}: done"


async def test_a_task_asks_its_question_through_the_person_whose_turn_started_it(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    ui = ScriptedUI(replies=["/accept interpretation=snake"])
    with anyio.fail_after(60):
        async with everything_chat(tmp_path, host_secret, ui) as chat:
            reply = await chat.command(f'{RESEARCH} {{"topic": "python", "ambiguous": true}}', ui)
    assert [question.asker for question in ui.questions] == ["everything"]
    assert "# Research Report: python (snake)" in reply


async def test_a_task_that_outlives_the_turn_comes_to_the_chat_later_and_the_agent_learns_it(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    model = RecordingModel()
    ui = ScriptedUI()
    call_timeout = 1.0  # under test: the research takes four stages of a second each
    with anyio.fail_after(60):
        async with everything_chat(tmp_path, host_secret, ui, model, call_timeout=call_timeout) as chat:
            started = anyio.current_time()
            reply = await chat.command(f'{RESEARCH} {{"topic": "tides"}}', ui)
            assert anyio.current_time() - started >= call_timeout
            assert "is still running on its server as a task" in reply
            assert "Research Report" not in reply
            await ui.until(lambda seen: any("Research Report: tides" in text for text in seen.sent))
            [late] = [text for text in ui.sent if "Research Report" in text]
            assert late.startswith(f"The task of {RESEARCH} (task ")
            assert "), still running when its turn ended, has finished.\n# Research Report: tides" in late

            await chat.command("hello", ui)
    returned = [
        part.content
        for message in model.seen[-1][0]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == RESEARCH
    ]
    assert [content for content in returned if "Research Report: tides" in str(content)]
    assert "still running" in str(returned[0])


async def test_progress_of_server_everythings_long_operation_is_shown(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    reply, texts = await shown_to_the_end(
        tmp_path, host_secret, 'everything__trigger-long-running-operation {"duration": 2, "steps": 4}'
    )
    assert "Long running operation completed. Duration: 2 seconds, Steps: 4." in reply
    assert texts[0].startswith("everything__trigger-long-running-operation: ")
    assert any(text.endswith("/4") for text in texts)
    assert texts[-1] == "everything__trigger-long-running-operation: done"
