"""A server's tool list: listing it (paginated, bounded) and hearing that it changed.

A 2025-11-25 server says so with ``notifications/tools/list_changed`` (on the listening stream,
or SSE's one stream), which the connection's message handler hears; a 2026-07-28 server sends
it on a ``subscriptions/listen`` stream, which a connection opens when the server offers it and
the connection is first used (see ``Connection``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
import mcp_types
from mcp.client import Client
from mcp.client.caching import CacheMode
from mcp.client.subscriptions import PromptsListChanged, SubscriptionLost
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["ChangeFollower", "list_tools", "listen_for_changes", "offers_changes"]

logger = logging.getLogger(__name__)

Relist = Callable[[Client, CacheMode, bool], Awaitable[None]]
"""Lists the tools again in this cache mode and tells the owner (always, or only if they differ)."""

_LISTENING_WAIT: Final = 5.0
"""Seconds a first call waits for the change stream to open and the tools to be looked at; a
server slower than that is called all the same."""
_LISTED_JUST_NOW: Final = 1.0
"""Seconds after a listing in which a change stream that opens does not list the tools again."""
_RELIST_EVERY: Final = 1.0
"""Seconds between two listings after changes: a burst of notifications costs one listing."""
_RELISTEN_AFTER: Final = 30.0
"""Seconds before a ``subscriptions/listen`` stream that dropped is opened again."""


async def list_tools(
    client: Client, *, server: str, max_pages: int, cache_mode: CacheMode = "use"
) -> tuple[mcp_types.Tool, ...]:
    """Every tool of the server, up to ``max_pages`` pages of them (the rest are ignored, with a warning)."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tuple(tools)
    logger.warning(
        "%s: tool listing stopped after %d pages; the remaining tools are ignored", server, max_pages
    )
    return tuple(tools)


def offers_changes(client: Client) -> bool:
    """Whether the server sends tool-list changes on a ``subscriptions/listen`` stream (2026-07-28)."""
    tools = client.server_capabilities.tools
    return (
        client.protocol_version in MODERN_PROTOCOL_VERSIONS and tools is not None and bool(tools.list_changed)
    )


async def listen_for_changes(
    client: Client,
    *,
    server: str,
    changed: Callable[[], None],
    opened: Callable[[], None],
    prompts: Callable[[], None] | None = None,
) -> None:
    """Hear tool-list changes on a ``subscriptions/listen`` stream, opened again when it drops.

    ``opened`` hears each time the stream is open (changes made while none was open were never
    sent: the tools are to be looked at again), ``changed`` each change the server announces;
    ``prompts``, when given and the server offers it, each change of its prompts.
    """
    offered = client.server_capabilities.prompts
    prompts_too = prompts is not None and offered is not None and bool(offered.list_changed)
    while True:
        try:
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=prompts_too
            ) as subscription:
                opened()
                async for event in subscription:
                    if isinstance(event, PromptsListChanged):
                        if prompts is not None:
                            prompts()
                    else:
                        changed()
            return  # the server closed the subscription itself
        except SubscriptionLost:
            logger.info("%s: the tool-change subscription dropped; opening it again", server)
        except Exception as exc:  # boundary: without the stream the list is still listed on reconnect
            logger.info("%s: no tool-change subscription: %s", server, type(exc).__name__)
            return
        await anyio.sleep(_RELISTEN_AFTER)


class _NotYet:
    """Stands for the ``caught up`` event before anyone waits for it."""

    @staticmethod
    def is_set() -> bool:
        return False

    @staticmethod
    def set() -> None:
        pass


_NOT_YET: Final = _NotYet()


class ChangeFollower:
    """When one connection lists its tools again: after a change the server announced, and once
    its change stream opened (changes made before were never sent), unless just listed.

    Runs in the connection's own task (``follow``); the connection's calls and the SDK's message
    handler only set flags and wake it. The change stream is opened at the first call
    (``start_listening``), in a task group entered only then: an idle connection holds neither.
    """

    def __init__(self, *, server: str, relist: Relist, stopped: anyio.Event) -> None:
        """``stopped``: the connection's stop, which ``stop`` is told of once it is set."""
        self._server = server
        self._relist = relist
        self._wake = anyio.Event()
        """Set when the connection's task has something to do: stop, listen, or list again."""
        self._stopped = stopped
        self._changed = False
        self.wanted = False
        """The server offers tool-list changes on a stream, not opened yet: the first call opens it."""
        self._listen_now = False
        self._catch_up = False
        self._caught_up: anyio.Event | _NotYet = _NOT_YET
        """The change stream opened (or could not be) and the tools were looked at again (made
        when the first call asks for the stream: an idle connection holds one event less)."""
        self._listed_at = -math.inf
        self.on_prompts: Callable[[], None] | None = None
        """Hears that the server said its prompts changed (on either channel); it must not wait."""

    def prompts_changed(self) -> None:
        """The server said its prompts changed."""
        if self.on_prompts is not None:
            self.on_prompts()

    def listed(self) -> None:
        """The tools were just listed."""
        self._listed_at = anyio.current_time()

    def changed(self) -> None:
        """The server said its tools changed: list them again."""
        self._changed = True
        self._wake.set()

    def stop(self) -> None:
        """The connection's stop was set: wake its task."""
        self._wake.set()

    async def start_listening(self) -> None:
        """Have the change stream opened, and wait, briefly, until the tools were looked at again:
        a first call must not run on tools the server changed before."""
        self.wanted = False
        caught_up = self._caught_up = anyio.Event()
        self._listen_now = True
        self._wake.set()
        with anyio.move_on_after(_LISTENING_WAIT):
            await caught_up.wait()

    def _opened(self) -> None:
        if self._caught_up.is_set():
            # Opened again after it dropped: its events (and the cache's evictions) were lost.
            self.changed()
        elif anyio.current_time() - self._listed_at > _LISTED_JUST_NOW:
            self._catch_up = True
        else:
            self._caught_up.set()
        self._wake.set()

    async def _listen(self, client: Client) -> None:
        try:
            await listen_for_changes(
                client,
                server=self._server,
                changed=self.changed,
                opened=self._opened,
                prompts=self.prompts_changed,
            )
        finally:
            self._caught_up.set()  # no stream (refused, or ended): nothing to wait for

    async def follow(self, client: Client) -> None:
        """Until stopped: list the tools again when there is cause to."""
        await self._serve(client)
        if self._listen_now and not self._stopped.is_set():
            self._listen_now = False
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._listen, client)
                await self._serve(client)
                tg.cancel_scope.cancel()

    async def _serve(self, client: Client) -> None:
        """Do what the task is woken for, until stopped (or, first, until a stream is wanted)."""
        while not self._stopped.is_set() and not self._listen_now:
            await self._wake.wait()
            self._wake = anyio.Event()
            if self._stopped.is_set():
                return
            if self._changed or self._catch_up:
                # After a change the server is asked; after the stream opened, the cache serves
                # while the server's ttlMs allows (a change it announced evicted it).
                changed, self._changed, self._catch_up = self._changed, False, False
                await self._relist(client, "refresh" if changed else "use", changed)
                self._caught_up.set()
                if changed:
                    # A server that says "changed" without pause gets one listing a second.
                    with anyio.move_on_after(_RELIST_EVERY):
                        await self._stopped.wait()
