"""Client adapter run by the MCP conformance suite (``conformance client --command ...``).

The suite starts a test server for one scenario, then runs this program with the server's URL
as the last argument and the scenario name in ``MCP_CONFORMANCE_SCENARIO``. The program does
what the scenario expects and exits 0; the suite judges what reached its server.

The client is Playa's own connection layer (``playa.mcp_remote._connection``), all of it inside
``connect``; the test runs this program with ``src`` on ``PYTHONPATH``. Playa answers no
server-initiated requests (elicitation, sampling), so scenarios that need one are listed in
expected-failures.txt.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types

from playa.mcp_remote._connection import ConnectionSettings, Connector, Endpoint

SCENARIO_TIMEOUT = 20.0


@dataclass
class Connection:
    """What a scenario needs from a connected client: the tool names and a way to call one."""

    tools: list[str]
    call_tool: Callable[[str, dict[str, Any]], Awaitable[str]]


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Connection]:
    """Connect to ``url`` with Playa's connection layer (transport "auto"), and close on exit."""
    async with anyio.create_task_group() as tg:
        endpoint = Endpoint(server="conformance", url=url, transport="auto", headers={})
        connection = await Connector(ConnectionSettings(connect_timeout=10, call_timeout=10)).connect(
            endpoint, tg
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

            yield Connection(tools=[tool.name for tool in connection.tools], call_tool=call_tool)
        finally:
            await connection.aclose()


async def _initialize(url: str) -> None:
    async with connect(url):
        pass


async def _tools_call(url: str) -> None:
    async with connect(url) as connection:
        answer = await connection.call_tool("add_numbers", {"a": 5, "b": 3})
        print(answer)


async def _elicitation_defaults(url: str) -> None:
    async with connect(url) as connection:
        print(await connection.call_tool("test_client_elicitation_defaults", {}))


async def _sse_retry(url: str) -> None:
    async with connect(url) as connection:
        print(await connection.call_tool("test_reconnection", {}))


SCENARIOS: dict[str, Callable[[str], Awaitable[None]]] = {
    "initialize": _initialize,
    "tools_call": _tools_call,
    "elicitation-sep1034-client-defaults": _elicitation_defaults,
    "sse-retry": _sse_retry,
}


def main(argv: list[str]) -> int:
    """Run the scenario named in the environment against the URL given last on the command line."""
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if len(argv) < 2 or scenario not in SCENARIOS:
        print(f"usage: MCP_CONFORMANCE_SCENARIO=<{'|'.join(SCENARIOS)}> client.py <url>", file=sys.stderr)
        return 2
    run = SCENARIOS[scenario]

    async def bounded() -> None:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            await run(argv[-1])

    anyio.run(bounded)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
