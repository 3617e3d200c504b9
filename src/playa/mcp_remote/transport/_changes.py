"""A server's tool list: listing it (paginated, bounded) and hearing that it changed.

A 2025-11-25 server says so with ``notifications/tools/list_changed`` (on the listening stream,
or SSE's one stream), which the connection's message handler hears; a 2026-07-28 server sends
it on a ``subscriptions/listen`` stream, which a connection opens when the server offers it and
the connection is first used (see ``Connection``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import anyio
import mcp_types
from mcp.client import Client
from mcp.client.caching import CacheMode
from mcp.client.subscriptions import SubscriptionLost
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["list_tools", "listen_for_changes", "offers_changes"]

logger = logging.getLogger(__name__)

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
    client: Client, *, server: str, changed: Callable[[], None], opened: Callable[[], None]
) -> None:
    """Hear tool-list changes on a ``subscriptions/listen`` stream, opened again when it drops.

    ``opened`` hears each time the stream is open (changes made while none was open were never
    sent: the tools are to be looked at again), ``changed`` each change the server announces.
    """
    while True:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                opened()
                async for _event in subscription:
                    changed()
            return  # the server closed the subscription itself
        except SubscriptionLost:
            logger.info("%s: the tool-change subscription dropped; opening it again", server)
        except Exception as exc:  # boundary: without the stream the list is still listed on reconnect
            logger.info("%s: no tool-change subscription: %s", server, type(exc).__name__)
            return
        await anyio.sleep(_RELISTEN_AFTER)
