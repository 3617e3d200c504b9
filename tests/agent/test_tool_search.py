"""Tool search: a chat with 6 × 40 tools offers a search, and a tool found is called in the same turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from bench._catalog import QUERIES, CatalogCallable, catalog
from pydantic_ai.tools import ToolDefinition

from playa.agent import Reply, rank_tools
from playa.core import ChatSession
from support.chat import ScriptedUI, msg
from support.host import new_host
from support.providers import PROTOCOLS, Protocol, ProviderRequest, serve_provider, text, tool_call

pytestmark = pytest.mark.anyio


def register_catalog(session: ChatSession) -> dict[str, CatalogCallable]:
    tools = {spec.name: CatalogCallable(spec) for spec in catalog()}
    for tool in tools.values():
        session.tools.register(tool)
    return tools


def offered(request: ProviderRequest) -> list[dict[str, Any]]:
    """The definitions the model is given in full: those not deferred, and those revealed."""
    shown = [
        tool
        for raw, tool in zip(request.body.get("tools") or [], request.tools, strict=True)
        if not raw.get("defer_loading")
    ]
    for item in request.body.get("input") or []:
        # Revealed: by pydantic-ai's own reveal, or as the answer to the provider's tool search.
        if isinstance(item, dict) and item.get("type") in ("additional_tools", "tool_search_output"):
            shown += item["tools"]
    return shown


def nbytes(value: Any) -> int:
    return len(json.dumps(value).encode())


def test_the_local_ranking_puts_the_wanted_tool_in_the_first_five_for_nineteen_searches_in_twenty() -> None:
    definitions = [
        ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters)
        for t in catalog()
    ]
    assert len(definitions) == 240 and len(QUERIES) == 40
    found = [want for query, want in QUERIES if want in rank_tools([query], definitions)[:5]]
    assert len(found) >= 38, sorted({want for _, want in QUERIES} - set(found))
    assert rank_tools(["refund money to a customer"], definitions)[0] == "shop__create_refund"
    assert rank_tools(["the of a"], definitions) == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_with_six_times_forty_tools_a_search_finds_the_tool_and_the_model_calls_it(
    data_dir: Path, protocol: Protocol
) -> None:
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model(protocol)) as host,
    ):
        session = await host.session("console:t", owner="owner")
        tools = register_catalog(session)
        provider.script(
            tool_call("search_tools", {"queries": ["schedule a meeting"]}),
            tool_call("calendar__create_event", {"fields": {"title": "standup"}}),
            text("booked"),
            # The next turn: the tool found before is called without a new search.
            tool_call("calendar__create_event", {"fields": {"title": "retro"}}),
            text("booked again"),
        )
        with anyio.fail_after(30):
            reply = await host.handle(session, msg("book a standup"), ScriptedUI())
        assert reply == Reply("booked", "agent")
        assert tools["calendar__create_event"].calls == [{"fields": {"title": "standup"}}]

        first, second, _ = provider.requests
        names = {tool["name"] for tool in offered(first)} - {None}
        # Ours as a function, or the provider's own tool search (OpenAI Responses, on models that
        # have it), which pydantic-ai answers with ours: a nameless entry of its own type.
        native = [raw for raw in first.body.get("tools") or [] if raw.get("type") == "tool_search"]
        assert ("search_tools" in names) != bool(native) and session.core_tools <= names
        assert not names & set(tools)
        every = sum(nbytes(t.name) + nbytes(t.description) + nbytes(t.parameters) for t in catalog())
        assert sum(nbytes(t) for t in offered(first)) <= every // 4
        # The search's answer names the tool, and the next request offers it.
        assert "calendar__create_event" in json.dumps(second.body.get("messages") or second.body["input"])
        assert (
            "calendar__create_event" in {tool["name"] for tool in offered(second)} or protocol == "anthropic"
        )
        assert len({tool["name"] for tool in offered(second)} & set(tools)) <= 5

        with anyio.fail_after(30):
            reply = await host.handle(session, msg("and a retro"), ScriptedUI())
        assert reply == Reply("booked again", "agent")
        assert tools["calendar__create_event"].calls[-1] == {"fields": {"title": "retro"}}


async def test_a_chat_under_the_budget_gets_every_tool_and_no_search(data_dir: Path) -> None:
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model("openai-chat")) as host,
    ):
        session = await host.session("console:t", owner="owner")
        few = [spec for spec in catalog() if spec.name.startswith("github__")][:10]
        for spec in few:
            session.tools.register(CatalogCallable(spec))
        provider.script(text("hi"))
        with anyio.fail_after(30):
            await host.handle(session, msg("hello"), ScriptedUI())
        [request] = provider.requests
        assert set(request.tool_names) == session.core_tools | {spec.name for spec in few}


async def test_the_chats_own_tools_of_an_extension_are_offered_whole_and_not_counted(data_dir: Path) -> None:
    """20 server tools and 2 tools an extension keeps whole: no search, and past 20 those 2 stay whole."""
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model("openai-chat")) as host,
    ):
        session = await host.session("console:t", owner="owner")
        specs = catalog()
        servers, own, extra = specs[:20], specs[20:22], specs[22]
        for spec in [*servers, *own]:
            session.tools.register(CatalogCallable(spec))
        session.kept_whole.update(spec.name for spec in own)
        provider.script(text("hi"), text("hi again"))
        with anyio.fail_after(30):
            await host.handle(session, msg("hello"), ScriptedUI())
        session.tools.register(CatalogCallable(extra))
        with anyio.fail_after(30):
            await host.handle(session, msg("hello again"), ScriptedUI())
        under, over = provider.requests
        assert set(under.tool_names) == session.core_tools | {spec.name for spec in [*servers, *own]}
        names = {tool["name"] for tool in offered(over)}
        assert "search_tools" in names and {spec.name for spec in own} <= names
        assert not names & {spec.name for spec in [*servers, extra]}


async def test_the_offline_model_is_offered_every_tool(data_dir: Path) -> None:
    async with new_host(data_dir) as host:
        session = await host.session("console:t", owner="owner")
        tools = register_catalog(session)
        with anyio.fail_after(30):
            reply = await host.handle(session, msg('shop__get_order {"id": "42"}'), ScriptedUI())
        assert reply is not None and "shop__get_order done" in reply.text
        assert tools["shop__get_order"].calls == [{"id": "42"}]
