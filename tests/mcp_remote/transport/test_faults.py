"""A chat with one broken server and one healthy one: the chat goes on, bounded, and cleans up.

Every test runs a real host with the ``mcp-remote`` extension and two servers on loopback: the
demo server (healthy, behind a bearer token) and one fault server from ``servers.faults``.
Both are added with ``/mcp_add`` as the owner would. A fake clock makes the failed server's
retry due at the next turn, so that turn really waits on the fault, within its bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import re
import resource
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from playa.agent import Host, Reply
from playa.core import ChatSession
from playa.mcp import MAX_NAME_LENGTH
from playa.mcp_remote import (
    ConnectionSettings,
    HostSecret,
    RemoteMcpSettings,
    resolve_host_secret,
)
from servers import faults
from support.chat import ScriptedUI, msg
from support.host import Clock
from support.remote import SETTINGS, demo_server, remote_host

pytestmark = pytest.mark.anyio

SECTION = "Remote MCP servers"
HEALTHY_TOKEN = "healthy-t0ken-value"
FAULTY_TOKEN = "faulty-server-t0ken"
# The connect and call timeouts are under test here. The healthy server shares them, so they
# are short next to a fault's (15 s by default) and still ~100 times what a loopback connect or
# call of the healthy server takes on a busy machine.
FAST = RemoteMcpSettings(
    connection=ConnectionSettings(connect_timeout=2.0, call_timeout=2.0, close_timeout=1.0)
)
MARGIN = 5.0
"""Room on top of a timeout for the rest of a turn (the model, the hooks, a loaded CI machine)."""

VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Resources:
    """Open file descriptors and asyncio tasks of this process at one moment."""

    fds: int
    tasks: int

    @classmethod
    def now(cls) -> Resources:
        # What earlier tests left in reference cycles (a socket among it) is freed first, so a
        # collection during the test cannot close an fd that was counted before it.
        gc.collect()
        return cls(fds=len(os.listdir("/proc/self/fd")), tasks=len(_our_tasks()))


def _our_tasks() -> list[asyncio.Task[Any]]:
    # sse-starlette, under the test servers, starts one shutdown watcher per event loop on its
    # first event stream, and it lives as long as the loop: the servers', not the client's.
    return [task for task in asyncio.all_tasks() if task.get_coro().__qualname__ != "_shutdown_watcher"]  # type: ignore[union-attr]


@dataclass
class Chat:
    """A host with one chat session, its owner's front end and the extension's clock."""

    host: Host
    session: ChatSession
    ui: ScriptedUI
    clock: Clock
    settings: RemoteMcpSettings

    async def say(self, text: str, *, within: float) -> Reply:
        with anyio.fail_after(within):
            reply = await self.host.handle(self.session, msg(text), self.ui)
        assert reply is not None
        return reply

    @property
    def section(self) -> str:
        return self.session.prompt.get(SECTION) or ""

    def replies_and_section(self) -> str:
        return "\n".join([*self.ui.sent, self.section])


def secret(data_dir: Path) -> HostSecret:
    resolved = resolve_host_secret(
        {"MCP_ENCRYPTION_SECRET": "x" * 32}, data_dir=data_dir, allow_generate=False
    )
    assert isinstance(resolved, HostSecret)
    return resolved


@contextlib.asynccontextmanager
async def chat_with_healthy_server(data_dir: Path, settings: RemoteMcpSettings = FAST) -> AsyncIterator[Chat]:
    """A running host whose chat has the healthy demo server added and connected."""
    clock = Clock(1_700_000_000.0)
    async with (
        demo_server(HEALTHY_TOKEN) as healthy,
        remote_host(data_dir, secret(data_dir), settings=settings, clock=clock) as host,
    ):
        session = await host.session("console:faults", owner="owner")
        chat = Chat(host, session, ScriptedUI(), clock, settings)
        reply = await chat.say(
            f"/mcp_add healthy {healthy.url} --bearer {HEALTHY_TOKEN}",
            within=settings.connection.connect_timeout + MARGIN,
        )
        assert reply.text.startswith("Added healthy: connected over streamable-http, 5 tools"), reply.text
        yield chat


async def assert_healthy_server_still_works(chat: Chat, *, within: float | None = None) -> None:
    reply = await chat.say(
        'healthy__echo {"text": "still here"}',
        within=within or chat.settings.connection.call_timeout + MARGIN,
    )
    assert reply.text == "[offline model] healthy__echo returned:\nstill here"
    assert "- healthy: available, 5 tools" in chat.section


def assert_nothing_left_behind(before: Resources) -> None:
    after = Resources.now()
    assert after.fds == before.fds, f"file descriptors: {before.fds} before, {after.fds} after"
    assert after.tasks == before.tasks, (
        f"asyncio tasks: {before.tasks} before, {after.tasks} after: {_our_tasks()}"
    )


def settings_for(reason: str) -> RemoteMcpSettings:
    """Short timeouts only where a timeout is the fault under test."""
    # A fault that is answered at once: no timeout is under test, so a busy machine has room.
    return FAST if "timed out" in reason else SETTINGS


def url_of(served: object) -> str:
    if isinstance(served, str):
        return served
    url = getattr(served, "url", None)
    assert isinstance(url, str)
    return url


Fault = Callable[[], AbstractAsyncContextManager[Any]]

HTML_PAGE = b"<!doctype html><html><head><title>Welcome</title></head><body>Hello!</body></html>"

CONNECT_FAULTS: dict[str, tuple[Fault, str]] = {
    "closed port": (faults.closed_port, "connection refused"),
    "blackhole": (faults.blackhole, "timed out after 2 s"),
    "accepts and closes at once": (faults.slammed_door, "server closed the connection"),
    "HTTP 500": (lambda: faults.http_answer(500), "HTTP 500 (server error)"),
    "HTTP 401": (lambda: faults.http_answer(401), "HTTP 401 (unauthorized: check the credentials)"),
    "an HTML page": (
        lambda: faults.http_answer(200, content_type="text/html", body=HTML_PAGE),
        "not an MCP endpoint (no event stream)",
    ),
    "invalid JSON": (lambda: faults.malformed_rpc("invalid-json"), "invalid response from the server"),
    "a result of the wrong shape": (
        lambda: faults.malformed_rpc("wrong-shape"),
        "invalid response from the server",
    ),
    "a response to another request": (lambda: faults.malformed_rpc("wrong-id"), "timed out after 2 s"),
    "a drip-feed": (faults.drip_feed, "timed out after 2 s"),
    # Not "HTTP 405" from an SSE attempt: a server that shook hands speaks this transport.
    # Playa's words only: the server's message goes to the owner (test_server_words.py).
    "a failing tool listing": (faults.broken_listing_mcp, "the server answered with an error"),
}


@pytest.mark.parametrize("fault", list(CONNECT_FAULTS))
async def test_a_server_that_fails_to_connect_is_unavailable_with_its_reason_and_the_chat_goes_on(
    tmp_path: Path, fault: str
) -> None:
    make, reason = CONNECT_FAULTS[fault]
    before = Resources.now()
    async with make() as served, chat_with_healthy_server(tmp_path, settings_for(reason)) as chat:
        connect_bound = chat.settings.connection.connect_timeout + MARGIN
        started = anyio.current_time()
        reply = await chat.say(
            f"/mcp_add faulty {url_of(served)} --bearer {FAULTY_TOKEN}", within=connect_bound
        )
        assert reply.text.startswith(f"Added faulty, but it is unavailable: {reason}; next retry at "), (
            reply.text
        )
        if "timed out" in reason:
            # The timeout under test, as a lower bound: the connect was given all of it.
            assert anyio.current_time() - started >= chat.settings.connection.connect_timeout

        # The retry is due: the next turn connects again, and waits no longer than a connect.
        chat.clock.advance(chat.settings.backoff(1) + 1)
        reply = await chat.say("hello", within=connect_bound)
        assert reply.kind == "agent"
        assert f"- faulty: unavailable: {reason}" in chat.section
        assert "retry" not in chat.section  # when belongs in /mcp_list, not in the prompt
        listed = await chat.say("/mcp_list", within=connect_bound)
        assert "(in 120 s)" in listed.text  # the second failure doubles the backoff
        assert f"- faulty: unavailable: {reason}" in reply.text  # the model was told

        await assert_healthy_server_still_works(chat)
        assert FAULTY_TOKEN not in chat.replies_and_section()
    assert_nothing_left_behind(before)


CALL_FAULTS: dict[str, str] = {
    "freeze": "timed out after 2 s",
    "cut": "server closed the connection",
    "drip": "timed out after 2 s",
    "garbled": "invalid response from the server",
    "misshapen": "invalid response from the server",
    "sse-huge": "the result is larger than 4 MiB, the most this host reads; it was not read",
}


@pytest.mark.parametrize("tool", list(CALL_FAULTS))
async def test_a_tool_that_fails_mid_call_gives_a_clear_error_and_the_chat_goes_on(
    tmp_path: Path, tool: str
) -> None:
    reason = CALL_FAULTS[tool]
    before = Resources.now()
    async with (
        faults.faulty_mcp() as faulty,
        chat_with_healthy_server(tmp_path, settings_for(reason)) as chat,
    ):
        call_bound = chat.settings.connection.call_timeout + MARGIN
        reply = await chat.say(
            f"/mcp_add faulty {faulty.url}", within=chat.settings.connection.connect_timeout + MARGIN
        )
        assert reply.text.startswith("Added faulty: connected over streamable-http, 8 tools"), reply.text

        started = anyio.current_time()
        reply = await chat.say(f"faulty__{tool} {{}}", within=call_bound)
        assert reply.text.startswith(
            f"[offline model] faulty__{tool} failed:\nfaulty__{tool} failed: {reason}"
        )
        if "timed out" in reason:
            # The timeout under test, as a lower bound: the call was given all of it.
            assert anyio.current_time() - started >= chat.settings.connection.call_timeout
        if tool == "freeze":
            assert faulty.frozen.is_set()
        else:
            assert faulty.calls == [tool]

        # The server's working tool still answers: over the same connection, or a new one.
        reply = await chat.say(
            'faulty__echo {"text": "again"}', within=chat.settings.connection.connect_timeout + call_bound
        )
        assert reply.text == "[offline model] faulty__echo returned:\nagain"
        await assert_healthy_server_still_works(chat)
    assert_nothing_left_behind(before)


def peak_rss_bytes() -> int:
    # Linux reports kilobytes.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def test_a_50_mb_result_is_refused_quickly_without_holding_it(tmp_path: Path) -> None:
    # A generous call timeout: the budget, not the timeout, must be what ends this call.
    settings = RemoteMcpSettings(
        connection=ConnectionSettings(connect_timeout=10.0, call_timeout=30.0, close_timeout=2.0)
    )
    before = Resources.now()
    peak_before = peak_rss_bytes()
    async with faults.faulty_mcp() as faulty, chat_with_healthy_server(tmp_path, settings) as chat:
        await chat.say(f"/mcp_add faulty {faulty.url}", within=1.0 + MARGIN)
        reply = await chat.say("faulty__huge {}", within=5.0)
        assert reply.text.startswith("[offline model] faulty__huge failed:\nfaulty__huge failed: ")
        assert "larger than 4 MiB" in reply.text
        assert len(reply.text) < 1000
        assert faulty.calls == ["huge"]
        reply = await chat.say('faulty__echo {"text": "again"}', within=1.0 + MARGIN)
        assert reply.text == "[offline model] faulty__echo returned:\nagain"
        await assert_healthy_server_still_works(chat)
    # Holding the result even once would take 50 MB; the whole exchange stays well below that.
    assert peak_rss_bytes() - peak_before < faults.HUGE_SIZE // 2
    assert_nothing_left_behind(before)


async def test_ten_thousand_oddly_named_tools_get_valid_unique_names_and_the_chat_goes_on(
    tmp_path: Path,
) -> None:
    # Listing 10,000 tools takes the in-process server and client about a second together (many
    # on a busy machine): a generous connect timeout, since this test is no test of speed.
    settings = RemoteMcpSettings(
        connection=ConnectionSettings(connect_timeout=60.0, call_timeout=60.0, close_timeout=2.0),
        max_tools_per_server=10_000,
    )
    listing = faults.crowded_listing()
    distinct = {tool.name for tool in listing}
    before = Resources.now()
    async with faults.crowded_mcp() as crowded, chat_with_healthy_server(tmp_path, settings) as chat:
        reply = await chat.say(f"/mcp_add faulty {crowded.url}", within=60.0 + MARGIN)
        assert reply.text.startswith(f"Added faulty: connected over streamable-http, {len(distinct)} tools")

        names = [tool.name for tool in chat.session.tools.active() if tool.name.startswith("faulty__")]
        assert len(names) == len(distinct) == 9_999  # the second "echo" is a duplicate
        assert len(set(names)) == len(names)
        assert all(VALID_NAME.fullmatch(name) and len(name) <= MAX_NAME_LENGTH for name in names)
        wide = chat.session.tools.get("faulty__wide_schema")
        assert len(wide.parameters["properties"]) == 2000
        deep = chat.session.tools.get("faulty__deep_schema")
        assert deep.parameters["type"] == "object"

        # Every turn costs pydantic-ai about a second with 10,000 tools (many on a busy machine):
        # one turn only, with a bound that is no test of speed.
        await assert_healthy_server_still_works(chat, within=60.0)
        # The 2,000-property schema is too large to send: withheld, and not counted as available.
        assert f"- faulty: available, {len(distinct) - 1} tools" in chat.section
        listed = await chat.say("/mcp_list", within=60.0 + MARGIN)
        assert "withheld from the model: faulty__wide_schema: its input schema is" in listed.text
        with anyio.fail_after(60):  # a healthy call among 10,000 tools, on a busy machine
            result = await chat.host.call_tool(chat.session, "faulty__echo", {"text": "found it"})
        assert (result.text, result.is_error) == ("found it", False)
    assert_nothing_left_behind(before)


async def test_a_frozen_call_is_dropped_and_the_host_still_exits_promptly(tmp_path: Path) -> None:
    before = Resources.now()
    async with faults.faulty_mcp() as faulty:
        async with chat_with_healthy_server(tmp_path) as chat:
            await chat.say(f"/mcp_add faulty {faulty.url}", within=1.0 + MARGIN)
            async with anyio.create_task_group() as tg:
                # The turn is cut short by the host's exit path: cancel it mid-call.
                tg.start_soon(functools.partial(chat.say, "faulty__freeze {}", within=10.0))
                with anyio.fail_after(5):
                    await faulty.frozen.wait()
                tg.cancel_scope.cancel()
            started = anyio.current_time()
        # Closing both connections (one of them mid-call) is bounded by the close timeout.
        assert anyio.current_time() - started < 2 * FAST.connection.close_timeout + MARGIN
    assert_nothing_left_behind(before)


async def test_a_server_with_too_many_tools_exposes_the_first_hundred_and_says_so(tmp_path: Path) -> None:
    settings = RemoteMcpSettings(
        connection=ConnectionSettings(connect_timeout=15.0, call_timeout=5.0, close_timeout=2.0)
    )
    distinct = {tool.name for tool in faults.crowded_listing()}
    async with faults.crowded_mcp() as crowded, chat_with_healthy_server(tmp_path, settings) as chat:
        reply = await chat.say(f"/mcp_add faulty {crowded.url}", within=60.0 + MARGIN)
        hidden = len(distinct) - 100
        assert reply.text.startswith(
            f"Added faulty: connected over streamable-http, 100 tools ({hidden} more not exposed: choose with --tools)"
        )
        names = [tool.name for tool in chat.session.tools.active() if tool.name.startswith("faulty__")]
        assert len(names) == 100
        assert "and 69 more" in (chat.section or "")  # the 2,000-property schema is withheld
        await assert_healthy_server_still_works(chat)
