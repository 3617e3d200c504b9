"""Long calls: progress keeps a call alive up to the longest a call may take, and is shown redacted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from anyio.abc import TaskGroup
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import TextContent

from playa.exceptions import ConfigError, RemoteTimeout
from playa.mcp_remote import (
    ConnectionSettings,
    Connector,
    Endpoint,
    HostSecret,
    RemoteMcpSettings,
)
from playa.mcp_remote.transport import Progress, poll_seconds, unrunnable_reason
from servers.python_servers import serve_asgi, serve_mcp
from servers.task_server import TaskServer
from support.chat import RecordingModel, ScriptedUI, msg
from support.host import remote_host
from support.progress import progress_done

pytestmark = pytest.mark.anyio

BASE = 2.0
"""The call timeout under test: short. Progress comes far more often than this."""
BEAT = 0.2
KEY = "k3y-0f-the-pr0gress-server-5ecret"


@dataclass
class Clock:
    """When the server last reported progress (the test shares the server's event loop and clock)."""

    last_progress: float = 0.0
    reports: int = 0

    async def report_every_beat(self, seconds: float, report: Callable[[int], Awaitable[None]]) -> None:
        """``report`` steps 1, 2, … every BEAT until ``seconds`` have passed, noting when."""
        end = anyio.current_time() + seconds
        step = 0
        while anyio.current_time() < end:
            step += 1
            await report(step)
            self.last_progress = anyio.current_time()
            self.reports += 1
            await anyio.sleep(BEAT)


def progress_server(clock: Clock) -> MCPServer:
    server = MCPServer("progress")

    @server.tool()
    async def steady(seconds: float, ctx: Context) -> str:
        """Report progress every BEAT until ``seconds`` have passed, then answer."""
        await clock.report_every_beat(
            seconds, lambda step: ctx.report_progress(step, None, f"step {step} for {KEY}")
        )
        return "steady done"

    @server.tool()
    async def falls_silent(seconds: float, ctx: Context) -> str:
        """Report progress for ``seconds``, then never again and never answer."""
        await clock.report_every_beat(seconds, lambda step: ctx.report_progress(step, 10))
        await anyio.sleep_forever()
        return "never"

    return server


def settings(call_max: float = 60.0) -> ConnectionSettings:
    return ConnectionSettings(connect_timeout=15.0, call_timeout=BASE, call_max=call_max, close_timeout=5.0)


def text_of(result: object) -> str:
    content = getattr(result, "content", [])
    return "".join(block.text for block in content if isinstance(block, TextContent))


async def test_progress_keeps_a_call_alive_past_the_call_timeout(task_group: TaskGroup) -> None:
    clock = Clock()
    seen: list[Progress] = []

    async def report(progress: Progress) -> None:
        seen.append(progress)

    with anyio.fail_after(30):
        async with serve_mcp(progress_server(clock)) as served:
            connection = await Connector(settings()).connect(Endpoint(server="p", url=served.url), task_group)
            started = anyio.current_time()
            result = await connection.call_tool("steady", {"seconds": 2.5 * BASE}, on_progress=report)
            elapsed = anyio.current_time() - started
            await connection.aclose()
    assert text_of(result) == "steady done"
    assert elapsed >= 2.5 * BASE  # well past the call timeout, which progress kept moving
    assert not connection.broken
    assert seen and seen[0].progress == 1 and seen[0].message == f"step 1 for {KEY}"
    assert [p.progress for p in seen] == sorted(p.progress for p in seen if p.progress is not None)


async def test_a_call_whose_progress_stops_is_cut_the_call_timeout_after_the_last_report(
    task_group: TaskGroup,
) -> None:
    clock = Clock()
    with anyio.fail_after(30):
        async with serve_mcp(progress_server(clock)) as served:
            connection = await Connector(settings()).connect(Endpoint(server="p", url=served.url), task_group)
            started = anyio.current_time()
            with pytest.raises(RemoteTimeout) as raised:
                await connection.call_tool("falls_silent", {"seconds": 1.5 * BASE})
            cut = anyio.current_time()
    assert raised.value.reason == f"timed out after {BASE:g} s"
    assert clock.last_progress - started >= 1.5 * BASE - BEAT  # it reported past the call timeout…
    assert cut - clock.last_progress >= BASE  # …and was cut a whole call timeout after it fell silent
    assert connection.broken


async def test_progress_never_keeps_a_call_past_the_longest_a_call_may_take(task_group: TaskGroup) -> None:
    clock = Clock()
    call_max = 2 * BASE
    with anyio.fail_after(30):
        async with serve_mcp(progress_server(clock)) as served:
            connection = await Connector(settings(call_max=call_max)).connect(
                Endpoint(server="p", url=served.url), task_group
            )
            started = anyio.current_time()
            with pytest.raises(RemoteTimeout) as raised:
                await connection.call_tool("steady", {"seconds": 10 * BASE})
            elapsed = anyio.current_time() - started
    assert raised.value.reason == f"still running after {call_max:g} s, the most a call may take"
    assert elapsed >= call_max
    assert clock.reports >= call_max / BEAT / 2  # it did report all along


async def test_a_call_is_cut_at_its_own_deadline_when_a_later_one_is_pending(task_group: TaskGroup) -> None:
    """The connection's one timer is set for the earliest deadline: a call that came back leaves
    it set for its later deadline, and a call in flight holds it there; a shorter call after or
    beside them is still cut on time."""
    clock = Clock()
    short, long = BASE / 4, 20 * BASE
    with anyio.fail_after(30):
        async with serve_mcp(progress_server(clock)) as served:
            connector = Connector(settings())
            connection = await connector.connect(Endpoint(server="p", url=served.url), task_group)
            assert (
                text_of(await connection.call_tool("steady", {"seconds": 0}, timeout=long)) == "steady done"
            )
            started = anyio.current_time()
            with pytest.raises(RemoteTimeout):
                await connection.call_tool("falls_silent", {"seconds": 0}, timeout=short)
            after_one = anyio.current_time() - started

            connection = await connector.connect(Endpoint(server="p", url=served.url), task_group)

            async def long_call() -> None:
                await connection.call_tool("steady", {"seconds": 2 * BASE}, timeout=long)

            async with anyio.create_task_group() as calls:
                calls.start_soon(long_call)
                await anyio.sleep(BEAT)  # the long call is in flight
                started = anyio.current_time()
                with pytest.raises(RemoteTimeout):
                    await connection.call_tool("falls_silent", {"seconds": 0}, timeout=short)
                beside_one = anyio.current_time() - started
                calls.cancel_scope.cancel()
    # Not held to the later deadline (the bounds beyond the lower one are loose: a busy machine).
    assert short <= after_one < long / 4
    assert short <= beside_one < long / 4


async def test_a_call_is_cut_on_time_on_an_event_loop_anyio_did_not_start() -> None:
    """An application that runs its own loop (``asyncio.run``) gets its calls cut on time too:
    the timer that cuts them goes off outside any task."""
    clock = Clock()
    short = BASE / 4

    async def call_on_own_loop(url: str) -> float:
        async with anyio.create_task_group() as task_group:
            connection = await Connector(settings()).connect(Endpoint(server="p", url=url), task_group)
            started = anyio.current_time()
            with pytest.raises(RemoteTimeout):
                await connection.call_tool("falls_silent", {"seconds": 0}, timeout=short)
            cut = anyio.current_time() - started
            await connection.aclose()
        return cut

    async with serve_mcp(progress_server(clock)) as served:
        with anyio.fail_after(30):
            cut = await anyio.to_thread.run_sync(
                asyncio.run, call_on_own_loop(served.url), abandon_on_cancel=True
            )
    assert short <= cut < 10 * BASE  # the bug this guards against: never cut at all


def test_the_longest_call_is_validated_at_construction() -> None:
    with pytest.raises(ConfigError, match=r"ConnectionSettings.call_max must be a positive number"):
        ConnectionSettings(call_max=float("inf"))
    with pytest.raises(
        ConfigError, match=r"ConnectionSettings.call_max \(30.0\) is below call_timeout \(60.0\)"
    ):
        ConnectionSettings(call_timeout=60.0, call_max=30.0)


async def test_progress_reaches_the_person_whose_turn_made_the_call_redacted(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    clock = Clock()
    ui = ScriptedUI()
    with anyio.fail_after(60):
        async with (
            serve_mcp(progress_server(clock)) as served,
            remote_host(tmp_path, host_secret, settings=RemoteMcpSettings(connection=settings())) as host,
        ):
            session = await host.session("console:progress", owner="owner")
            added = await host.handle(session, msg(f'/mcp_add prog {served.url} --header "X-Key: {KEY}"'), ui)
            assert added is not None and added.text.startswith("Added prog: connected")
            reply = await host.handle(session, msg('prog__steady {"seconds": 1.5}'), ui)
            assert reply is not None and "steady done" in reply.text
            await progress_done(ui)
    texts = [text for _, text in ui.progress_shown]
    assert texts[0].startswith("prog__steady: 1 — step 1 for ")
    assert all(KEY not in text for text in texts)
    assert any("[redacted]" in text for text in texts)
    assert texts[-1] == "prog__steady: done"
    assert len({key for key, _ in ui.progress_shown}) == 1


def test_poll_intervals_are_the_servers_within_bounds() -> None:
    def task(interval: int | None) -> mcp_types.Task:
        return mcp_types.Task(
            task_id="t", status="working", created_at="", last_updated_at="", ttl=None, poll_interval=interval
        )

    assert poll_seconds(task(1500)) == 1.5
    assert poll_seconds(task(0)) == 0.2  # a hostile 0 must not spin
    assert poll_seconds(task(10**9)) == 30.0
    assert poll_seconds(task(None)) == 1.0


@pytest.mark.parametrize(
    ("protocol", "capabilities", "reason"),
    [
        ("2025-11-25", {"tasks": {"requests": {"tools": {"call": {}}}}}, None),
        ("2025-11-25", {"tools": {}}, "the server does not offer tool calls as tasks"),
        ("2026-07-28", {"tasks": {"requests": {"tools": {"call": {}}}}}, "which this host does not speak"),
    ],
)
def test_a_task_only_tool_is_runnable_only_where_tasks_are_spoken(
    protocol: str, capabilities: dict[str, Any], reason: str | None
) -> None:
    required = mcp_types.Tool(
        name="research",
        input_schema={"type": "object"},
        execution=mcp_types.ToolExecution(task_support="required"),
    )
    optional = required.model_copy(update={"execution": mcp_types.ToolExecution(task_support="optional")})
    parsed = mcp_types.ServerCapabilities.model_validate(capabilities)
    found = unrunnable_reason(required, protocol, parsed)
    assert (found is None) if reason is None else (found is not None and reason in found)
    assert unrunnable_reason(optional, protocol, parsed) is None


class TaskOnlyServer(MCPServer):
    """Lists its ``research`` tool as runnable only as a task, which this server cannot do."""

    def __init__(self) -> None:
        super().__init__("taskonly")

        @self.tool()
        def research(topic: str) -> str:
            """Research a topic."""
            return topic

        @self.tool()
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

    async def _handle_list_tools(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        tools = [
            tool.model_copy(update={"execution": mcp_types.ToolExecution(task_support="required")})
            if tool.name == "research"
            else tool
            for tool in await self.list_tools()
        ]
        return mcp_types.ListToolsResult(tools=tools)


async def test_a_tool_the_host_cannot_run_is_not_offered_and_mcp_tools_says_why(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    # The handshake: the 2026 protocol carries no task support in a tool's definition at all.
    why = "it runs only as a task, and the server does not offer tool calls as tasks"
    model = RecordingModel()
    ui = ScriptedUI()
    with anyio.fail_after(60):
        async with (
            serve_mcp(TaskOnlyServer(), protocols="handshake") as served,
            remote_host(tmp_path, host_secret, model, RemoteMcpSettings(connection=settings())) as host,
        ):
            session = await host.session("console:taskonly", owner="owner")
            added = await host.handle(session, msg(f"/mcp_add t {served.url}"), ui)
            listed = await host.handle(session, msg("/mcp_tools"), ui)
            await host.handle(session, msg("hello"), ui)
    assert added is not None and "t__add" in added.text and "t__research" not in added.text
    assert listed is not None
    assert listed.text.splitlines() == [
        "t__add — [t] Add two numbers.",
        f"t: not offered to the agent: 'research': {why}",
    ]
    assert "t__add" in model.tools() and "t__research" not in model.tools()


def hostile_task_server() -> TaskServer:
    """A task server whose task's states and result quote the chat's credential."""
    return TaskServer(status_message=f"working with Bearer {KEY}", result_text=f"the report, signed {KEY}")


async def test_a_late_task_result_reaches_the_chat_the_history_and_the_model_without_the_credential(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    server = hostile_task_server()
    model = RecordingModel()
    call_timeout = 1.0  # under test: the task runs until the test lets it finish
    connection = ConnectionSettings(connect_timeout=15.0, call_timeout=call_timeout, call_max=60.0)
    ui = ScriptedUI()
    with anyio.fail_after(60):
        async with (
            serve_asgi(server, path="/mcp") as served,
            remote_host(tmp_path, host_secret, model, RemoteMcpSettings(connection=connection)) as host,
        ):
            session = await host.session("console:hostile", owner="owner")
            added = await host.handle(session, msg(f'/mcp_add h {served.url} --header "X-Key: {KEY}"'), ui)
            assert added is not None and "h__slow" in added.text
            started = anyio.current_time()
            reply = await host.handle(session, msg("h__slow"), ui)
            assert anyio.current_time() - started >= call_timeout
            assert reply is not None and "is still running on its server as a task (task t-1" in reply.text
            server.done.set()
            await ui.until(lambda seen: any("the report" in text for text in seen.sent))
            await host.handle(session, msg("hello"), ui)
            history = (tmp_path / "sessions").rglob("history.jsonl")
            stored = b"".join(path.read_bytes() for path in history)
    [late] = [text for text in ui.sent if "the report" in text]
    assert late == (
        "The task of h__slow (task t-1), still running when its turn ended, has finished.\n"
        "the report, signed [redacted]"
    )
    assert any("working with Bearer [redacted]" in text for _, text in ui.progress_shown)
    assert server.polls >= 2
    shown = [*ui.sent, *(text for _, text in ui.progress_shown), reply.text]
    assert all(KEY not in text for text in shown)
    assert b"the report, signed [redacted]" in stored and KEY.encode() not in stored
    seen_by_model = repr(model.seen[-1][0])
    assert "the report, signed [redacted]" in seen_by_model and KEY not in seen_by_model


async def test_a_task_still_running_at_the_longest_a_call_may_take_is_given_up_and_cancelled(
    tmp_path: Path, host_secret: HostSecret
) -> None:
    server = hostile_task_server()  # never done
    call_timeout, call_max = 1.0, 3.0  # under test
    connection = ConnectionSettings(connect_timeout=15.0, call_timeout=call_timeout, call_max=call_max)
    ui = ScriptedUI()
    with anyio.fail_after(60):
        async with (
            serve_asgi(server, path="/mcp") as served,
            remote_host(tmp_path, host_secret, settings=RemoteMcpSettings(connection=connection)) as host,
        ):
            session = await host.session("console:hostile", owner="owner")
            await host.handle(session, msg(f"/mcp_add h {served.url}"), ui)
            started = anyio.current_time()
            reply = await host.handle(session, msg("h__slow"), ui)
            assert reply is not None and "is still running on its server as a task" in reply.text
            await ui.until(lambda seen: any("did not finish" in text for text in seen.sent))
            given_up = anyio.current_time()
    [late] = [text for text in ui.sent if "did not finish" in text]
    assert late == (
        "The task of h__slow (task t-1), still running when its turn ended, did not finish.\n"
        f"It failed: h__slow failed: the task did not finish within {call_max:g} s"
    )
    assert given_up - started >= call_max
    assert "tasks/cancel" in server.methods and "tasks/result" not in server.methods
    assert ui.progress_shown[-1][1] == "h__slow: failed"
