"""Client adapter run by the MCP conformance suite (``conformance client --command ...``).

The suite starts a test server for one scenario, then runs this program with the server's URL
as the last argument and the scenario name in ``MCP_CONFORMANCE_SCENARIO``. The program does
what the scenario expects and exits 0; the suite judges what reached its server.

The client is Playa's own connection layer (``playa.mcp_remote._connection``), all of it inside
``connect``; the test runs this program with ``src`` on ``PYTHONPATH``. A server's questions
(elicitation) go through Playa's own conversion to a person's question and back; the person
here answers ``/accept`` alone, so every field takes its default (SEP-1034).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types

from playa.exceptions import RemoteError
from playa.host import Answer, Question, answer_from_text
from playa.mcp_remote._connection import ConnectionSettings, Connector, Endpoint

SCENARIO_TIMEOUT = 45.0


@dataclass
class Connection:
    """What a scenario needs from a connected client: the tool names and a way to call one."""

    tools: list[str]
    listed: Sequence[types.Tool]
    call_tool: Callable[[str, dict[str, Any]], Awaitable[str]]


async def _accept_defaults(question: Question) -> Answer:
    """The person who answers every question with ``/accept`` alone: each field takes its default."""
    answer = answer_from_text(question, "/accept")
    assert isinstance(answer, Answer), answer
    return answer


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Connection]:
    """Connect to ``url`` with Playa's connection layer (transport "auto"), and close on exit."""
    async with anyio.create_task_group() as tg:
        endpoint = Endpoint(server="conformance", url=url, transport="auto", headers={})
        connection = await Connector(ConnectionSettings(connect_timeout=30, call_timeout=30)).connect(
            endpoint, tg, ask=_accept_defaults
        )
        try:

            async def call_tool(name: str, arguments: dict[str, Any]) -> str:
                result = await connection.call_tool(name, arguments)
                text = " ".join(
                    block.text for block in result.content if isinstance(block, types.TextContent)
                )
                if result.is_error:
                    raise RuntimeError(f"tool {name} failed: {text}")
                return text

            yield Connection(
                tools=[tool.name for tool in connection.tools], listed=connection.tools, call_tool=call_tool
            )
        finally:
            await connection.aclose()


async def _initialize(url: str) -> None:
    async with connect(url):
        pass


async def _add_numbers(url: str) -> None:
    async with connect(url) as connection:
        print(await connection.call_tool("add_numbers", {"a": 5, "b": 3}))


async def _elicitation_defaults(url: str) -> None:
    async with connect(url) as connection:
        print(await connection.call_tool("test_client_elicitation_defaults", {}))


async def _sse_retry(url: str) -> None:
    async with connect(url) as connection:
        print(await connection.call_tool("test_reconnection", {}))


async def _request_state(url: str) -> None:
    async with connect(url) as connection:
        for name in (
            "test_mrtr_echo_state",
            "test_mrtr_unrelated",
            "test_mrtr_no_state",
            "test_mrtr_no_result_type",
        ):
            print(await connection.call_tool(name, {}))


_STUBS: dict[str, Any] = {
    "string": "x",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "object": {},
    "array": [],
    "null": None,
}


async def _every_tool(url: str) -> None:
    """Call every tool Playa offers, with the least arguments its schema requires."""
    async with connect(url) as connection:
        for tool in connection.listed:
            properties = tool.input_schema.get("properties", {})
            arguments = {
                name: _STUBS.get(properties.get(name, {}).get("type"), "x")
                for name in tool.input_schema.get("required", [])
            }
            await _tolerant(connection, tool.name, arguments)


async def _replayed_calls(url: str) -> None:
    """Make the calls the suite names in its context, with its arguments as they are."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    async with connect(url) as connection:
        for call in context.get("toolCalls", []):
            if call["name"] in connection.tools:
                await _tolerant(connection, call["name"], call.get("arguments") or {})


async def _tolerant(connection: Connection, name: str, arguments: dict[str, Any]) -> None:
    # These scenarios judge the requests; a call the mock server refuses is no failure here.
    try:
        print(await connection.call_tool(name, arguments))
    except (RuntimeError, RemoteError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)


async def _schema_echo(url: str) -> None:
    async with connect(url) as connection:
        focal = next(tool for tool in connection.listed if tool.name == "json_schema_2020_12_tool")
        print(await connection.call_tool("json_schema_echo", {"schema": focal.input_schema}))


SCENARIOS: dict[str, Callable[[str], Awaitable[None]]] = {
    "initialize": _initialize,
    "tools_call": _add_numbers,
    "elicitation-sep1034-client-defaults": _elicitation_defaults,
    "sse-retry": _sse_retry,
    "request-metadata": _add_numbers,
    "sep-2322-client-request-state": _request_state,
    "http-standard-headers": _add_numbers,
    "http-custom-headers": _replayed_calls,
    "http-invalid-tool-headers": _every_tool,
    "json-schema-ref-no-deref": _initialize,
    "json-schema-2020-12-preservation": _schema_echo,
}
"""Every scenario's own steps; an ``auth/*`` scenario only connects (the OAuth issue adds the flow)."""


def main(argv: list[str]) -> int:
    """Run the scenario named in the environment against the URL given last on the command line."""
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    run = SCENARIOS.get(scenario, _initialize if scenario.startswith("auth/") else None)
    if len(argv) < 2 or run is None:
        print(
            f"usage: MCP_CONFORMANCE_SCENARIO=<{'|'.join(SCENARIOS)}|auth/…> client.py <url>", file=sys.stderr
        )
        return 2

    async def bounded() -> None:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            await run(argv[-1])

    anyio.run(bounded)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
