"""A host's long life: idle sessions closed and reopened, configuration checked at construction."""

from __future__ import annotations

import gc
import math
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from playa.agent import History, Host, HostConfig
from playa.agent._sessions import COLLECT_AFTER
from playa.core import ChatSession, Extension, ToolResult
from playa.exceptions import ConfigError
from support.chat import Script, ScriptedUI, msg
from support.host import new_host

pytestmark = pytest.mark.anyio


class Lifecycle(Extension):
    """Records the session hooks it sees."""

    id = "lifecycle"

    def __init__(self) -> None:
        self.events: list[tuple[str, ChatSession]] = []

    async def on_session_start(self, session: ChatSession) -> None:
        self.events.append(("start", session))

    async def on_session_close(self, session: ChatSession) -> None:
        self.events.append(("close", session))


def say(text: str) -> Any:
    return lambda m, i: ModelResponse(parts=[TextPart(text)])


async def test_an_idle_session_is_closed_and_its_next_message_reopens_it_with_its_history(
    data_dir: Path,
) -> None:
    hooks = Lifecycle()
    script = Script([say("first"), say("second")])
    async with new_host(data_dir, script, [hooks]) as host:
        session = await host.session("console:t", owner="owner")
        await host.handle(session, msg("remember PINEAPPLE"), ScriptedUI())
        with anyio.fail_after(10):
            assert await host.evict_idle(0) == 1
        assert session.closed.is_set()
        assert host.open_sessions == 0
        assert [event for event, _ in hooks.events] == ["start", "close"]

        # The front end still holds the old session: the host reopens the chat for it.
        reply = await host.handle(session, msg("what was it?"), ScriptedUI())
        assert reply is not None and reply.text == "second"
        assert "PINEAPPLE" in repr(script.seen[1][0])
        assert [event for event, _ in hooks.events] == ["start", "close", "start"]
        reopened = hooks.events[-1][1]
        assert reopened is not session and reopened.scope == session.scope
        assert await host.session("console:t", owner="owner") is reopened
        assert len(host.history(reopened).messages) == 4


async def test_a_session_in_the_middle_of_a_turn_is_never_evicted(data_dir: Path) -> None:
    entered, release = anyio.Event(), anyio.Event()

    class Slow:
        name = "slow"
        description = "waits"
        parameters: Mapping[str, Any] = {"type": "object", "properties": {}}

        async def call(self, arguments: dict[str, Any]) -> ToolResult:
            entered.set()
            await release.wait()
            return ToolResult("done")

    script = Script([lambda m, i: ModelResponse(parts=[ToolCallPart("slow", {})]), say("ok")])
    async with new_host(data_dir, script) as host:
        session = await host.session("console:t", owner="owner")
        session.tools.register(Slow())
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(host.handle, session, msg("go"), ScriptedUI())
                await entered.wait()
                assert await host.evict_idle(0) == 0
                release.set()
        assert not session.closed.is_set()
        assert await host.evict_idle(0) == 1


async def test_sessions_idle_longer_than_the_configured_time_are_closed_in_the_background(
    data_dir: Path,
) -> None:
    hooks = Lifecycle()
    async with new_host(data_dir, extensions=[hooks], session_idle=0.05) as host:
        sessions = [await host.session(f"console:{n}", owner="owner") for n in range(20)]
        with anyio.fail_after(10):
            for session in sessions:
                await session.closed.wait()
        assert host.open_sessions == 0
    assert sorted(s.scope for event, s in hooks.events if event == "close") == sorted(
        s.scope for s in sessions
    )


async def test_shutdown_closes_every_session_at_once(data_dir: Path) -> None:
    closing = 0
    all_closing = anyio.Event()

    class Slow(Extension):
        id = "slow-close"

        async def on_session_close(self, session: ChatSession) -> None:
            nonlocal closing
            closing += 1
            if closing == 5:
                all_closing.set()
            # Each close waits for all five to have started: one after another, it never ends.
            await all_closing.wait()

    with anyio.fail_after(10):
        async with new_host(data_dir, extensions=[Slow()], hook_timeout=5) as host:
            for n in range(5):
                await host.session(f"console:{n}", owner="owner")
    assert all_closing.is_set()


class SlowOpen(Lifecycle):
    """Its blocking open step holds one chat's open (in its worker thread) until released."""

    id = "slow-open"

    def __init__(self, slow: str) -> None:
        super().__init__()
        self.slow = slow
        self.began, self.release = threading.Event(), threading.Event()
        self.steps: list[tuple[str, int, bool]] = []
        """Each step: its scope, its thread, and whether the workspace folder was there already."""

    def session_opening(self, session: ChatSession) -> Callable[[], None] | None:
        def step() -> None:
            self.steps.append((session.scope, threading.get_ident(), session.workspace.is_dir()))
            if session.scope == self.slow:
                self.began.set()
                assert self.release.wait(10)

        return step


async def test_chats_open_side_by_side_and_two_callers_for_one_chat_get_one_session(data_dir: Path) -> None:
    # A restarted bot meets many chats at once: one chat's files still being read hold up no other.
    slow = SlowOpen("console:slow")
    sessions: list[ChatSession] = []

    async def open_slow(host: Host) -> None:
        sessions.append(await host.session("console:slow", owner="owner"))

    with anyio.fail_after(10):
        async with new_host(data_dir, extensions=[slow]) as host, anyio.create_task_group() as tg:
            tg.start_soon(open_slow, host)
            tg.start_soon(open_slow, host)
            assert await anyio.to_thread.run_sync(slow.began.wait, 10)
            other = await host.session("console:other", owner="owner")
            assert not slow.release.is_set() and [s.scope for _, s in slow.events] == ["console:other"]
            slow.release.set()
    assert len(sessions) == 2 and sessions[0] is sessions[1] is not other
    assert [scope for scope, _, _ in slow.steps].count("console:slow") == 1
    assert [event for event, s in slow.events if s is sessions[0]] == ["start", "close"]


async def test_a_chats_open_reads_its_history_and_runs_the_extensions_steps_in_one_worker_thread(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = SlowOpen("none")
    slow.release.set()
    script = Script([say("first")])
    async with new_host(data_dir, script, [slow]) as host:
        session = await host.session("console:t", owner="owner")
        await host.handle(session, msg("remember PINEAPPLE"), ScriptedUI())
        await host.evict_idle(0)
        # The reopened chat's history is read in the thread its extension's step runs in.
        loop_thread = threading.get_ident()
        read_in: list[int] = []
        real_load = History.of_file

        def of_file(folder: Path, read: Any) -> History:
            read_in.append(threading.get_ident())
            return real_load(folder, read)

        monkeypatch.setattr(History, "of_file", of_file)
        reopened = await host.session("console:t", owner="owner")
        assert "PINEAPPLE" in str(host.history(reopened).messages)
    assert [(scope, made) for scope, _, made in slow.steps] == [("console:t", True)] * 2
    assert all(thread != loop_thread for _, thread, _ in slow.steps) and read_in == [loop_thread]


class BrokenOpen(Lifecycle):
    id = "broken-open"

    def session_opening(self, session: ChatSession) -> Callable[[], None] | None:
        def step() -> None:
            raise OSError("the disk said no")

        return step


async def test_an_extensions_open_step_that_fails_is_logged_and_the_chat_opens(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = BrokenOpen()
    async with new_host(data_dir, extensions=[broken]) as host:
        session = await host.session("console:t", owner="owner")
        assert host.open_sessions == 1 and [e for e, _ in broken.events] == ["start"]
        assert session.workspace.is_dir()
    assert "broken-open SessionOpening step failed in console:t" in caplog.text
    assert "the disk said no" in caplog.text


@pytest.mark.parametrize(
    ("field", "value"),
    [("session_idle", 0.0), ("session_idle", -1.0), ("hook_timeout", math.inf), ("hook_timeout", math.nan)],
)
def test_a_host_config_with_an_impossible_time_is_refused_naming_it(
    data_dir: Path, field: str, value: float
) -> None:
    with pytest.raises(ConfigError, match=f"HostConfig.{field} must be a positive number of seconds"):
        HostConfig(data_dir=data_dir, **{field: value})


def test_an_extension_that_needs_longer_hooks_than_the_host_allows_gets_them(data_dir: Path) -> None:
    class Patient(Extension):
        id = "patient"

        @property
        def min_hook_timeout(self) -> float:
            return 120.0

    patient, plain = Patient(), Extension()
    host = new_host(data_dir, extensions=[patient, plain], hook_timeout=60.0)
    assert host.hook_timeout(patient) == 120.0
    assert host.hook_timeout(plain) == 60.0


class Moves(Lifecycle):
    """Records the session hooks and the scope moves it sees."""

    async def on_scope_move(self, old_scope: str, session: ChatSession) -> None:
        self.events.append((f"move from {old_scope}", session))


async def test_a_chat_moves_to_a_new_scope_after_its_running_turn_with_history_and_workspace(
    data_dir: Path,
) -> None:
    hooks = Moves()
    release = anyio.Event()
    entered = anyio.Event()

    async def slow(messages: Any, info: Any) -> ModelResponse:
        entered.set()
        await release.wait()
        return ModelResponse(parts=[TextPart("done")])

    async with new_host(data_dir, FunctionModel(slow), [hooks]) as host:
        old = await host.session("telegram:-5", owner="1")
        (old.workspace / "notes.txt").write_text("kept")
        outcome: list[str] = []
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(host.handle, old, msg("remember PINEAPPLE"), ScriptedUI())
                await entered.wait()

                async def move() -> None:
                    outcome.append(await host.move_scope("telegram:-5", "telegram:-1005", owner="1"))

                tg.start_soon(move)
                await anyio.wait_all_tasks_blocked()
                assert not outcome  # the running turn ends first
                release.set()
        assert outcome == ["moved"]
        assert [event for event, _ in hooks.events] == ["start", "close", "move from telegram:-5", "start"]
        moved = hooks.events[-1][1]
        assert moved.scope == "telegram:-1005"
        assert (moved.workspace / "notes.txt").read_text() == "kept"
        assert "PINEAPPLE" in repr(host.history(moved).messages)
        assert await host.session("telegram:-1005", owner="1") is moved
        assert not old.workspace.exists()
        # Telegram says it twice: the second time there is nothing left to move.
        assert await host.move_scope("telegram:-5", "telegram:-1005", owner="1") == "nothing"


async def test_a_chat_is_not_moved_onto_a_scope_that_has_files_of_its_own(data_dir: Path) -> None:
    async with new_host(data_dir) as host:
        old = await host.session("telegram:-6", owner="1")
        (old.workspace / "notes.txt").write_text("old")
        new = await host.session("telegram:-1006", owner="1")
        (new.workspace / "notes.txt").write_text("new")
        assert await host.move_scope("telegram:-6", "telegram:-1006", owner="1") == "occupied"
        assert (old.workspace / "notes.txt").read_text() == "old"
        assert (new.workspace / "notes.txt").read_text() == "new"


class _Cycle:
    """A closed chat's leftover in a reference cycle, as a task's frame or the agent's graph holds it."""

    def __init__(self) -> None:
        self.me = self


async def test_what_closed_chats_leave_in_reference_cycles_is_freed_as_they_close(data_dir: Path) -> None:
    # The collector is off, as good as its rare full collections under the playa command's thresholds.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        async with new_host(data_dir) as host:
            first: list[weakref.ref[_Cycle]] = []
            for batch in range(3):
                leftovers: list[weakref.ref[_Cycle]] = []
                for n in range(COLLECT_AFTER // 2):
                    session = await host.session(f"console:c{batch}-{n}", owner="owner")
                    cycle = _Cycle()
                    setattr(cycle, "session", session)  # noqa: B010 - the cycle: session → leftover → session
                    setattr(session, "leftover", cycle)  # noqa: B010
                    leftovers.append(weakref.ref(cycle))
                    del cycle, session
                await host.evict_idle(0)
                if batch == 0:
                    first = leftovers
                    # Fewer than COLLECT_AFTER closed: nothing is paid for yet.
                    assert all(ref() is not None for ref in leftovers)
            assert all(ref() is None for ref in first)
    finally:
        if was_enabled:
            gc.enable()
