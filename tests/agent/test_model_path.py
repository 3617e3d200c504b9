"""The model path a real user runs: pydantic-ai's real provider clients against loopback providers.

The recorded request bodies are the oracle for what the model received.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from playa.agent import Host, ModelLimits, Reply, resolve_model
from playa.exceptions import ConfigError
from support.chat import GUEST, ScriptedUI, msg
from support.host import new_host
from support.providers import PROTOCOLS, Protocol, ProviderServer, hang, serve_provider, status, text

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def provider_host(
    data_dir: Path, protocol: Protocol, *, limits: ModelLimits | None = None
) -> AsyncIterator[tuple[Host, ProviderServer]]:
    limits = limits or ModelLimits(timeout=30.0)
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model(protocol), model_limits=limits) as host,
    ):
        yield host, provider


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_hung_provider_ends_the_turn_with_a_clear_reply_and_the_chat_goes_on(
    data_dir: Path, protocol: Protocol
) -> None:
    limits = ModelLimits(timeout=0.5, retries=0)
    async with provider_host(data_dir, protocol, limits=limits) as (host, provider):
        session = await host.session("console:t", owner="owner")
        step = hang()
        provider.script(step, text("back again"))
        started = anyio.current_time()
        with anyio.fail_after(30):
            reply = await host.handle(session, msg("hello?"), ScriptedUI())
        waited = anyio.current_time() - started
        assert reply is not None and reply.kind == "error"
        assert "did not answer within 0.5 s" in reply.text
        assert "not kept" in reply.text
        assert waited >= 0.5
        with anyio.fail_after(10):
            await step.disconnected.wait()
        assert host.history(session).messages == []

        with anyio.fail_after(30):
            reply = await host.handle(session, msg("still there?"), ScriptedUI())
        assert reply == Reply("back again", "agent")
        assert len(provider.requests) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_failing_provider_gets_a_bounded_number_of_attempts(
    data_dir: Path, protocol: Protocol
) -> None:
    async with provider_host(data_dir, protocol, limits=ModelLimits(timeout=30.0, retries=1)) as (
        host,
        provider,
    ):
        session = await host.session("console:t", owner="owner")
        provider.script(status(500, "overloaded"), status(500, "overloaded"), text("never sent"))
        with anyio.fail_after(60):
            reply = await host.handle(session, msg("hello?"), ScriptedUI())
        assert reply is not None and reply.kind == "error"
        assert "overloaded" in reply.text
        # One retry, where the provider SDK would make two.
        assert len(provider.requests) == 2


async def test_the_owner_stops_a_running_turn_and_the_chat_goes_on(data_dir: Path) -> None:
    async with provider_host(data_dir, "openai-chat") as (host, provider):
        session = await host.session("console:t", owner="owner")
        step = hang()
        provider.script(step, text("fresh start"))
        replies: list[Reply | None] = []
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                replies.append(await host.handle(session, msg("think hard"), ScriptedUI()))

            tg.start_soon(turn)
            with anyio.fail_after(10):
                await step.reached.wait()
            refused = await host.handle(session, msg("/stop", GUEST), ScriptedUI())
            assert refused is not None and "Only this chat's owner" in refused.text
            stopped = await host.handle(session, msg("/stop"), ScriptedUI())
            assert stopped == Reply("Stopping the running turn.", "command")
        [reply] = replies
        assert reply is not None and reply.kind == "error" and reply.text.startswith("Stopped.")
        with anyio.fail_after(10):
            await step.disconnected.wait()
        assert host.history(session).messages == []

        idle = await host.handle(session, msg("/stop"), ScriptedUI())
        assert idle == Reply("Nothing is running in this chat.", "command")
        with anyio.fail_after(30):
            reply = await host.handle(session, msg("hello again"), ScriptedUI())
        assert reply == Reply("fresh start", "agent")


@pytest.mark.parametrize(
    ("protocol", "variable"), [("openai-chat", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]
)
async def test_a_refused_key_names_the_variable_to_set(
    data_dir: Path, protocol: Protocol, variable: str
) -> None:
    async with provider_host(data_dir, protocol) as (host, provider):
        session = await host.session("console:t", owner="owner")
        provider.script(status(401, "Incorrect API key provided: api***"))
        with anyio.fail_after(30):
            reply = await host.handle(session, msg("hello"), ScriptedUI())
    assert reply is not None and reply.kind == "error"
    assert f"refused its API key: check {variable}." in reply.text
    assert "not kept" in reply.text


@pytest.mark.parametrize("model", ["openai:", "anthropic: ", "openai-chat:"])
def test_a_model_string_without_a_model_name_is_refused(model: str) -> None:
    with pytest.raises(ConfigError, match="names no model"):
        resolve_model(model)
