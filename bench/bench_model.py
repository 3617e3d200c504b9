"""Targets of the model path: a stable prompt, a request that stays within the budget, tool search.

Runs pydantic-ai's real OpenAI Chat Completions client; its HTTP client is given a transport
that records each request body and answers from a script, in process (no socket, so the
numbers are Playa's and pydantic-ai's work, not the network's).

1. Nothing changes for 100 turns: the instructions and the tool definitions sent are
   byte-identical in every request (a provider can reuse its cached prefix).
2. 1,000 turns with an 8,000-token budget: every request body stays within it (at three bytes a
   token), and a turn costs the same at turn 1,000 as at turn 100.
3. 6 × 40 tools: the definitions a request gives the model are at most 25 % of all definitions'
   bytes, and the right tool is in the first 5 results of the search for ≥ 95 % of 40 searches.
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolDefinition

from bench._catalog import QUERIES, CatalogCallable, catalog
from bench._common import Report, verdict
from bench._playa import QuietUI, data_dir, message
from playa.agent import Host, HostConfig, rank_tools
from playa.agent._context import BYTES_PER_TOKEN

Answer = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class RecordingProvider:
    """Chat Completions in process: records each body, answers with ``answer(body)``."""

    answer: Answer
    bodies: list[dict[str, Any]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    def model(self) -> OpenAIChatModel:
        transport = httpx2.MockTransport(self._handle)
        client = httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1/v1")
        provider = OpenAIProvider(base_url="http://127.0.0.1/v1", api_key="bench-key", http_client=client)
        return OpenAIChatModel("gpt-5.5", provider=provider)

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        raw = request.read()
        body = json.loads(raw)
        self.bodies.append(body)
        self.sizes.append(len(raw))
        return httpx2.Response(200, json=_completion(len(self.bodies), self.answer(body)))


def _completion(n: int, message: dict[str, Any]) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-5.5",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _text(value: str) -> dict[str, Any]:
    return {"role": "assistant", "content": value}


def _call(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    call = {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _prefix(body: dict[str, Any]) -> bytes:
    """What a provider caches: the instructions and the tool definitions."""
    system = [m for m in body["messages"] if m["role"] in ("system", "developer")]
    return json.dumps([system, body.get("tools")], sort_keys=True).encode()


async def _stable_prefix(report: Report, turns: int) -> None:
    provider = RecordingProvider(lambda body: _text("ok"))
    with data_dir() as data:
        async with Host(HostConfig(data_dir=data, model=provider.model())) as host:
            session = await host.session("console:bench", owner="owner")
            for spec in catalog()[:12]:
                session.tools.register(CatalogCallable(spec))
            for n in range(turns):
                await host.handle(session, message(f"turn {n}"), QuietUI())
    distinct = len({_prefix(body) for body in provider.bodies})
    report.add(
        f"distinct instructions + tools over {turns} unchanged turns",
        f"{distinct} of {turns}",
        ratio=f"{distinct / turns:.3f}",
        target="1",
        verdict=verdict(distinct == 1),
    )


async def _budget(report: Report, turns: int) -> None:
    budget = 8_000
    provider = RecordingProvider(
        lambda body: (
            _call("list_files", {"path": "."}) if body["messages"][-1]["role"] == "user" else _text("done")
        )
    )
    times: list[float] = []
    with data_dir() as data:
        config = HostConfig(data_dir=data, model=provider.model(), context_tokens=budget)
        async with Host(config) as host:
            session = await host.session("console:bench", owner="owner")
            for n in range(turns):
                started = anyio.current_time()
                await host.handle(session, message(f"turn {n}: what is in the workspace now?"), QuietUI())
                times.append(anyio.current_time() - started)
            stored = len(host.history(session))
    largest = max(provider.sizes)
    limit = budget * BYTES_PER_TOKEN
    report.add(
        f"largest request body over {turns} turns (2 requests a turn), budget {budget:,} tokens",
        f"{largest:,} B",
        f"{limit:,} B",
        f"{largest / limit:.2f}",
        target="≤ 1",
        verdict=verdict(largest <= limit),
    )
    early = statistics.median(times[turns // 10 : turns // 10 + 50])
    late = statistics.median(times[-50:])
    report.add(
        f"turn time at turn {turns // 10} vs the last 50 (median)",
        f"{late * 1e3:.2f} ms",
        f"{early * 1e3:.2f} ms",
        f"{late / early:.2f}",
        target="≤ 1.5",
        verdict=verdict(late / early <= 1.5),
    )
    report.notes.append(f"the stored history kept all {stored:,} messages of {turns:,} turns")


def _definition_bytes(name: str, description: str | None, parameters: Any) -> int:
    return len(json.dumps([name, description, parameters]).encode())


async def _search(report: Report) -> None:
    tools = catalog()
    definitions = [
        ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters)
        for t in tools
    ]
    found = sum(want in rank_tools([query], definitions)[:5] for query, want in QUERIES)
    queries = itertools.cycle(QUERIES)

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last["role"] == "user":
            return _call("search_tools", {"queries": [next(queries)[0]]})
        return _text("found")

    provider = RecordingProvider(answer)
    with data_dir() as data:
        async with Host(HostConfig(data_dir=data, model=provider.model())) as host:
            session = await host.session("console:bench", owner="owner")
            for spec in tools:
                session.tools.register(CatalogCallable(spec))
            await host.handle(session, message("find me a tool"), QuietUI())
    every = sum(_definition_bytes(t.name, t.description, t.parameters) for t in tools)
    sent = max(
        sum(
            _definition_bytes(
                t["function"]["name"], t["function"].get("description"), t["function"]["parameters"]
            )
            for t in body.get("tools") or []
        )
        for body in provider.bodies
    )
    report.add(
        "definitions in a request / all 240 definitions (bytes, largest request)",
        f"{sent:,} B",
        f"{every:,} B",
        f"{sent / every:.3f}",
        target="≤ 0.25",
        verdict=verdict(sent <= every / 4),
    )
    report.add(
        "searches with the right tool in the first 5 results",
        f"{found} of {len(QUERIES)}",
        ratio=f"{found / len(QUERIES):.3f}",
        target="≥ 0.95",
        verdict=verdict(found >= 0.95 * len(QUERIES)),
    )


async def run(quick: bool) -> Report:
    report = Report("model", "Model path: a stable prompt, a bounded request, tool search (6 × 40 tools)")
    await _stable_prefix(report, 100)
    await _budget(report, 200 if quick else 1_000)
    await _search(report)
    report.notes.append(
        "pydantic-ai's real OpenAI Chat Completions client; its HTTP transport answers in process. "
        "On Anthropic and OpenAI Responses the deferred definitions also travel, marked defer_loading, "
        "and the provider keeps them out of the model's context until found."
    )
    return report


if __name__ == "__main__":
    from bench.__main__ import print_report

    print_report(anyio.run(run, True))
