"""Tool schemas every provider accepts: the recorded request bodies of real provider clients are the oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest

from playa.agent import ModelLimits
from playa.mcp_remote import ConnectionSettings, HostSecret, RemoteMcpSettings
from servers.faults import listing_mcp
from servers.python_servers import closed_port
from support.chat import ScriptedUI, msg
from support.host import Clock, remote_host
from support.providers import PROTOCOLS, Protocol, serve_provider, text, tool_call

pytestmark = pytest.mark.anyio

SETTINGS = RemoteMcpSettings(connection=ConnectionSettings(connect_timeout=10.0, call_timeout=10.0))

ECHO = mcp_types.Tool(
    name="echo",
    description="Return the text unchanged.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)
# Public reports name DigitalOcean, Spacelift and Apify servers with arrays like these.
NO_ITEMS = mcp_types.Tool(
    name="tag",
    description="Tag droplets.",
    input_schema={
        "type": "object",
        "properties": {
            "ids": {"type": "array"},
            "filter": {"type": "object", "properties": {"labels": {"type": ["array", "null"]}}},
            "pairs": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
        },
    },
)
HUGE = mcp_types.Tool(
    name="huge",
    description="Has an enormous schema.",
    input_schema={
        "type": "object",
        "properties": {"region": {"type": "string", "enum": [f"region-{i:05d}" for i in range(5000)]}},
    },
)


def arrays_without_items(schema: Any) -> list[Any]:
    """Every array schema in ``schema`` that has no ``items`` schema."""
    found: list[Any] = []
    if isinstance(schema, dict):
        kinds = schema.get("type")
        if (kinds == "array" or (isinstance(kinds, list) and "array" in kinds)) and not isinstance(
            schema.get("items"), dict
        ):
            found.append(schema)
        for value in schema.values():
            found += arrays_without_items(value)
    elif isinstance(schema, list):
        for value in schema:
            found += arrays_without_items(value)
    return found


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_arrays_without_items_are_repaired_and_a_tool_that_cannot_be_sent_is_withheld(
    data_dir: Path, host_secret: HostSecret, protocol: Protocol
) -> None:
    async with serve_provider() as provider, listing_mcp([ECHO, NO_ITEMS, HUGE]) as server:
        model, limits = provider.model(protocol), ModelLimits(timeout=30)
        async with remote_host(data_dir, host_secret, model, SETTINGS, model_limits=limits) as host:
            session = await host.session("console:t", owner="owner")
            ui = ScriptedUI()
            with anyio.fail_after(30):
                added = await host.handle(session, msg(f"/mcp_add bad {server.url}"), ui)
                assert added is not None and "connected" in added.text
                provider.script(tool_call("bad__echo", {"text": "hi"}), text("it said hi"))
                reply = await host.handle(session, msg("echo hi"), ui)
                listed = await host.handle(session, msg("/mcp_list"), ui)

    assert reply is not None and reply.text == "it said hi"
    first, second = provider.requests
    for request in (first, second):
        names = request.tool_names
        assert {"bad__echo", "bad__tag"} <= set(names)
        assert "bad__huge" not in names
        [tag] = [tool for tool in request.tools if tool["name"] == "bad__tag"]
        assert arrays_without_items(tag["parameters"]) == []
        assert tag["parameters"]["properties"]["ids"]["items"] == {}
    assert arrays_without_items(json.loads(first.raw)) == []
    assert listed is not None
    assert "withheld from the model: bad__huge: its input schema is" in listed.text
    assert "bad__tag" not in listed.text


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_instructions_and_tools_are_byte_identical_across_turns_while_a_server_is_down(
    data_dir: Path, host_secret: HostSecret, protocol: Protocol
) -> None:
    clock = Clock(1_000_000.0)
    async with (
        serve_provider() as provider,
        listing_mcp([NO_ITEMS, ECHO]) as server,
        closed_port() as down_url,
    ):
        model, limits = provider.model(protocol), ModelLimits(timeout=30)
        async with remote_host(
            data_dir, host_secret, model, SETTINGS, clock=clock, model_limits=limits
        ) as host:
            session = await host.session("console:t", owner="owner")
            ui = ScriptedUI()
            with anyio.fail_after(30):
                await host.handle(session, msg(f"/mcp_add live {server.url}"), ui)
                await host.handle(session, msg(f"/mcp_add down {down_url}"), ui)
                provider.script(text("one"), text("two"), text("three"))
                for seconds in (0, 17, 42):
                    clock.now += seconds  # the retry is not due yet: nothing changed but the clock
                    await host.handle(session, msg(f"turn at {clock.now}"), ui)

    first, *rest = provider.requests
    assert "down: unavailable: connection refused" in first.instructions
    for request in rest:
        assert request.instructions == first.instructions
        assert json.dumps(request.body["tools"]) == json.dumps(first.body["tools"])
    assert first.tool_names == sorted(first.tool_names)
    if protocol == "anthropic":
        # The stable prefix is marked for the provider's prompt cache.
        assert "cache_control" in json.dumps(first.body.get("tools")) + json.dumps(first.body.get("system"))
