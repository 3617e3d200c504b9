from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo

from playa.agent import Host
from playa.core import ChatSession, Command, CommandContext, Extension, ToolResult, ToolResultEvent
from support.chat import GUEST, Script, ScriptedUI, msg
from support.host import new_host

pytestmark = pytest.mark.anyio


@dataclass
class EchoTool:
    name: str
    description: str = "echoes"
    parameters: Mapping[str, Any] = None  # type: ignore[assignment]
    fail: bool = False

    def __post_init__(self) -> None:
        self.parameters = {"type": "object", "properties": {}}

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        if self.fail:
            raise RuntimeError(f"{self.name} exploded")
        return ToolResult(f"{self.name} says {json.dumps(arguments)}")


@dataclass
class ActingTool:
    """A tool that, called, does ``act`` to its chat (its tools, mid-turn) and says ``says``."""

    name: str
    description: str
    act: Callable[[], None]
    says: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        self.act()
        return ToolResult(self.says)


def call(name: str, args: dict[str, Any] | None = None) -> Any:
    return lambda m, i: ModelResponse(parts=[ToolCallPart(tool_name=name, args=args or {})])


def say(text: str) -> Any:
    return lambda m, i: ModelResponse(parts=[TextPart(text)])


def tool_names(info: AgentInfo) -> set[str]:
    return {t.name for t in info.function_tools}


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


class CommandsOnly(Extension):
    """An extension whose one part is the commands it adds."""

    def __init__(self, name: str, *commands: Command) -> None:
        self.id = name
        self._commands = commands

    def commands(self) -> Sequence[Command]:
        return self._commands


async def scripted_host(data_dir: Path, script: Script, extensions: list[Extension] | None = None) -> Host:
    return new_host(data_dir, script, extensions or [])


async def test_a_tool_registered_mid_turn_is_offered_at_the_next_model_step(data_dir: Path) -> None:
    late = EchoTool("late")
    script = Script([call("register_late"), call("late"), say("ok")])
    async with await scripted_host(data_dir, script) as host:
        session = await host.session("console:t", owner="owner")
        register = ActingTool(
            "register_late", "registers another tool", lambda: session.tools.register(late), "done"
        )
        session.tools.register(register)
        reply = await host.handle(session, msg("go"), ScriptedUI())
    assert reply is not None and reply.text == "ok"
    first, second = script.seen[0][1], script.seen[1][1]
    assert "late" not in tool_names(first)
    assert "late" in tool_names(second)
    assert "late says {}" in returns(script.seen[2][0])[-1].model_response_str()


async def test_a_tool_deactivated_mid_turn_disappears_and_cannot_be_called(data_dir: Path) -> None:
    victim = EchoTool("victim")
    script = Script([call("deactivate_victim"), say("done")])
    async with await scripted_host(data_dir, script) as host:
        session = await host.session("console:t", owner="owner")
        session.tools.register(victim)
        switch_off = ActingTool(
            "deactivate_victim",
            "switches the victim off",
            lambda: session.tools.deactivate("victim"),
            "switched off",
        )
        session.tools.register(switch_off)
        await host.handle(session, msg("go"), ScriptedUI())
        assert "victim" in tool_names(script.seen[0][1])
        assert "victim" not in tool_names(script.seen[1][1])
        result = await host.call_tool(session, "victim", {})
    assert result.is_error
    assert result.text == "tool 'victim' is not active"


async def test_commands_and_their_replies_never_reach_history_or_the_model(data_dir: Path) -> None:
    async def secret_command(ctx: CommandContext) -> str:
        return "COMMAND-REPLY-7731"

    zap = CommandsOnly("test", Command("zap", "zaps", secret_command))
    script = Script([say("first"), say("second")])
    async with await scripted_host(data_dir, script, [zap]) as host:
        session = await host.session("console:t", owner="owner")
        ui = ScriptedUI()
        await host.handle(session, msg("hello"), ui)
        reply = await host.handle(session, msg("/zap COMMAND-ARG-5521"), ui)
        assert reply is not None and reply.text == "COMMAND-REPLY-7731"
        await host.handle(session, msg("/mcp_nothing --bearer MCP-ARG-9981"), ui)
        await host.handle(session, msg("again"), ui)
        history_file = host.history(session).path.read_text()
    seen = json.dumps([repr(m) for m, _ in script.seen])
    for marker in ("COMMAND-REPLY-7731", "COMMAND-ARG-5521", "MCP-ARG-9981", "/zap"):
        assert marker not in history_file
        assert marker not in seen
    assert "again" in history_file


@pytest.mark.parametrize(
    "text",
    [
        "/mcp_add x --bearer K",
        "/mcp-add x",
        "/MCPADD",
        "/mcp.add",
        "/mcp",
        "  /mcp_whatever --bearer abc",
        "/mcp_add@bot x",
    ],
)
async def test_every_message_starting_with_mcp_is_a_command(offline_host: Host, text: str) -> None:
    session = await offline_host.session("console:t", owner="owner")
    reply = await offline_host.handle(session, msg(text, ref=1), ScriptedUI())
    assert reply is not None and reply.kind == "command"
    assert offline_host.history(session).messages == []


async def test_an_unknown_command_gets_the_help(offline_host: Host) -> None:
    session = await offline_host.session("console:t", owner="owner")
    reply = await offline_host.handle(session, msg("/nosuch qzxv"), ScriptedUI())
    assert reply is not None
    assert reply.text.startswith("Unknown command.")
    # Never quoted back: a mistyped command may hold a key.
    assert "nosuch" not in reply.text and "qzxv" not in reply.text
    assert "/help" in reply.text


@pytest.mark.parametrize(
    "text", ["/mcp_add--bearer=sk-proj-Zq7Xw3Kpl9vR2mN8bT4yF6hJ", "/Zq7Xw3Kpl9vR2mN8bT4y"]
)
async def test_an_unknown_command_is_never_logged_by_name(
    offline_host: Host, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    session = await offline_host.session("console:t", owner="owner")
    with caplog.at_level(logging.DEBUG):
        reply = await offline_host.handle(session, msg(text), ScriptedUI())
        known = await offline_host.handle(session, msg("/help"), ScriptedUI())
    assert reply is not None and reply.text.startswith("Unknown command.")
    assert known is not None and known.kind == "command"
    logged = "\n".join(record.getMessage() for record in caplog.records).lower()
    assert "an unknown command in console:t" in logged
    assert "command /help in console:t" in logged
    assert "zq7xw3k" not in logged


async def test_a_path_is_not_a_command(offline_host: Host) -> None:
    session = await offline_host.session("console:t", owner="owner")
    reply = await offline_host.handle(session, msg("/tmp/file.txt is where it is"), ScriptedUI())
    assert reply is not None and reply.kind == "agent"


async def test_an_owner_command_from_someone_else_is_refused(offline_host: Host) -> None:
    session = await offline_host.session("console:t", owner="owner")
    reply = await offline_host.handle(session, msg("/reset", sender=GUEST), ScriptedUI())
    assert reply is not None and reply.text == "Only this chat's owner can use /reset."


async def test_a_secret_answer_never_enters_history_or_the_model(data_dir: Path) -> None:
    received: list[str] = []

    async def ask_key(ctx: CommandContext) -> str:
        answer = await ctx.ui.ask("Key?", secret=True)
        received.append(answer or "")
        return "stored"

    asking = CommandsOnly("asking", Command("key", "asks for a key", ask_key))
    script = Script([say("one"), say("two")])
    async with await scripted_host(data_dir, script, [asking]) as host:
        session = await host.session("console:t", owner="owner")
        ui = ScriptedUI(answers=["SECRET-ANSWER-4417"])
        await host.handle(session, msg("before"), ui)
        await host.handle(session, msg("/key"), ui)
        await host.handle(session, msg("after"), ui)
        history_file = host.history(session).path.read_text()
    assert received == ["SECRET-ANSWER-4417"]
    assert ui.asked == [("Key?", True)]
    assert "SECRET-ANSWER-4417" not in history_file
    assert "SECRET-ANSWER-4417" not in repr([m for m, _ in script.seen])


async def test_a_command_carrying_a_secret_is_deleted_and_a_failed_delete_is_reported(
    offline_host: Host,
) -> None:
    async def noop(ctx: CommandContext) -> str:
        return "ok"

    offline_host.commands.add(Command("put", "puts", noop, carries_secret=lambda args: "--bearer" in args))
    session = await offline_host.session("console:t", owner="owner")
    ui = ScriptedUI(can_delete=False)
    reply = await offline_host.handle(session, msg("/put --bearer abcdefgh", ref=42), ui)
    assert ui.deleted == [42]
    assert reply is not None and "delete it yourself" in reply.text and "rotate" in reply.text
    ui = ScriptedUI()
    reply = await offline_host.handle(session, msg("/put plain", ref=43), ui)
    assert ui.deleted == []


async def test_tool_result_hooks_see_and_rewrite_every_result_errors_included(data_dir: Path) -> None:
    seen: list[tuple[str, bool]] = []

    class Rewriter(Extension):
        id = "rewriter"

        async def on_tool_result(self, event: ToolResultEvent) -> None:
            seen.append((event.tool_name, event.result.is_error))
            event.result = ToolResult(event.result.text.replace("says", "SAID"), event.result.is_error)

    script = Script(
        [
            call("good", {"a": 1}),
            call("bad"),
            call("missing"),
            call("write_file", {"path": "f", "content": "says"}),
            say("end"),
        ]
    )
    async with await scripted_host(data_dir, script, [Rewriter()]) as host:
        session = await host.session("console:t", owner="owner")
        session.tools.register(EchoTool("good"))
        session.tools.register(EchoTool("bad", fail=True))
        await host.handle(session, msg("go"), ScriptedUI())
    assert ("good", False) in seen and ("bad", True) in seen and ("write_file", False) in seen
    final_messages = script.seen[-1][0]
    texts = [p.model_response_str(wrap_if_error=False) for p in returns(final_messages)]
    assert 'good SAID {"a": 1}' in texts
    assert any("bad exploded" in t for t in texts)
    assert all(" says " not in t for t in texts)


async def test_a_raising_result_hook_withholds_the_result_and_the_chat_goes_on(data_dir: Path) -> None:
    class Broken(Extension):
        id = "broken"

        async def on_tool_result(self, event: ToolResultEvent) -> None:
            raise RuntimeError("hook bug")

        async def on_before_agent_start(self, session: ChatSession) -> None:
            raise RuntimeError("another hook bug")

    script = Script([call("good"), say("still here")])
    async with await scripted_host(data_dir, script, [Broken()]) as host:
        session = await host.session("console:t", owner="owner")
        session.tools.register(EchoTool("good"))
        reply = await host.handle(session, msg("go"), ScriptedUI())
    assert reply is not None and reply.text == "still here"
    [part] = returns(script.seen[1][0])
    assert "withheld" in part.model_response_str()
    assert "good says" not in part.model_response_str()


async def test_prompt_sections_reach_the_instructions_in_a_stable_order(data_dir: Path) -> None:
    class Sections(Extension):
        id = "sections"

        async def on_before_agent_start(self, session: ChatSession) -> None:
            session.prompt.set("Zeta", "last by name")
            session.prompt.set("Alpha", "first by name")

    script = Script([say("a")])
    async with await scripted_host(data_dir, script, [Sections()]) as host:
        session = await host.session("console:t", owner="owner")
        await host.handle(session, msg("hi"), ScriptedUI())
    instructions = script.seen[0][1].instructions or ""
    assert "## Alpha\nfirst by name" in instructions
    assert instructions.index("## Alpha") < instructions.index("## Zeta")
    assert instructions.startswith("You are the agent of one chat in Playa.")


async def test_a_slow_session_start_hook_is_bounded(data_dir: Path) -> None:
    class Slow(Extension):
        id = "slow"

        async def on_session_start(self, session: ChatSession) -> None:
            await anyio.sleep_forever()

    async with new_host(data_dir, extensions=[Slow()], hook_timeout=0.2) as host:
        with anyio.fail_after(5):
            session = await host.session("console:t", owner="owner")
        reply = await host.handle(session, msg("hi"), ScriptedUI())
    assert reply is not None and reply.kind == "agent"


async def test_empty_messages_are_ignored(offline_host: Host) -> None:
    session = await offline_host.session("console:t", owner="owner")
    assert await offline_host.handle(session, msg("   \n"), ScriptedUI()) is None
    assert offline_host.history(session).messages == []


async def test_a_model_failure_is_answered_and_the_chat_goes_on(data_dir: Path) -> None:
    def explode(m: list[ModelMessage], i: AgentInfo) -> ModelResponse:
        raise RuntimeError("provider down")

    script = Script([explode, say("back")])
    async with await scripted_host(data_dir, script) as host:
        session = await host.session("console:t", owner="owner")
        failed = await host.handle(session, msg("one"), ScriptedUI())
        ok = await host.handle(session, msg("two"), ScriptedUI())
    assert failed is not None and failed.kind == "error" and "provider down" in failed.text
    assert ok is not None and ok.text == "back"


async def test_history_survives_a_restart(data_dir: Path) -> None:
    async with new_host(data_dir) as host:
        session = await host.session("console:t", owner="owner")
        await host.handle(session, msg("remember the word PINEAPPLE"), ScriptedUI())
    script = Script([say("ok")])
    async with await scripted_host(data_dir, script) as host:
        session = await host.session("console:t", owner="owner")
        await host.handle(session, msg("what was it?"), ScriptedUI())
    assert "PINEAPPLE" in repr(script.seen[0][0])


async def test_chats_do_not_share_tools_or_history(offline_host: Host) -> None:
    one = await offline_host.session("console:one", owner="owner")
    two = await offline_host.session("console:two", owner="owner")
    one.tools.register(EchoTool("only_in_one"))
    await offline_host.handle(one, msg("hello one"), ScriptedUI())
    assert "only_in_one" not in two.tools
    assert offline_host.history(two).messages == []
    assert one.workspace != two.workspace


async def test_each_turn_ends_with_the_turn_end_hook_also_a_failed_one_and_a_raising_hook_is_contained(
    data_dir: Path,
) -> None:
    ended: list[tuple[str, bool]] = []

    class Watching(Extension):
        id = "watching"

        def on_turn_end(self, session: ChatSession) -> None:
            # Called once the turn let go of its front end: nothing of it is left to reach.
            ended.append((session.scope, session.turn_ui is None))
            raise RuntimeError("a broken turn-end hook")

    def explode(m: list[ModelMessage], i: AgentInfo) -> ModelResponse:
        raise RuntimeError("provider down")

    script = Script([say("one"), explode, say("three")])
    async with await scripted_host(data_dir, script, [Watching()]) as host:
        session = await host.session("console:t", owner="owner")
        replies = [await host.handle(session, msg(text), ScriptedUI()) for text in ("a", "b", "c")]
        assert await host.handle(session, msg("/help"), ScriptedUI()) is not None  # no turn
    assert [reply.kind if reply else None for reply in replies] == ["agent", "error", "agent"]
    assert ended == [("console:t", True)] * 3
