"""A server's resources on the wire: list resources and templates, read one, subscribe to it.

Every request goes through ``Connection.send``: the call timeout, the result budget and the
one error seam apply as they do to a tool call. A read always asks the server (the response
cache is not used for it), so it returns what the resource holds now.

Subscriptions: a 2025-era session sends ``resources/subscribe`` once per URI and hears
``notifications/resources/updated`` through the connection's message handler; a 2026-07-28
session names its URIs in the filter of a ``subscriptions/listen`` stream, which its owner opens
again whenever the set grows (``follow_resource_updates``). What a connection subscribed to, and
which of those the server said changed, is its ``ResourceUpdates``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import mcp_types
from mcp.client.subscriptions import ResourceUpdated
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...exceptions import CallFailed, RemoteError, RemoteTimeout
from ._connection import Connection

__all__ = [
    "MAX_SUBSCRIPTIONS",
    "ResourceListing",
    "follow_resource_updates",
    "list_resources",
    "listens_for_updates",
    "offers_resources",
    "offers_subscriptions",
    "read_resource",
    "subscribe_resource",
]

MAX_SUBSCRIPTIONS: Final = 100
"""Resources one connection subscribes to at most: a model reading thousands of URIs must not
make the server (and this host) keep thousands of subscriptions."""


@dataclass(frozen=True)
class ResourceListing:
    """What a server lists: its resources and templates, and whether pages were left unread."""

    resources: tuple[mcp_types.Resource, ...]
    templates: tuple[mcp_types.ResourceTemplate, ...]
    truncated: bool


def offers_resources(connection: Connection) -> bool:
    """Whether the server declared resources: only then are they listed or read."""
    capabilities = connection.capabilities
    return capabilities is not None and capabilities.resources is not None


def offers_subscriptions(connection: Connection) -> bool:
    """Whether the server offers subscriptions to its resources (``resources.subscribe``)."""
    capabilities = connection.capabilities
    return (
        capabilities is not None
        and capabilities.resources is not None
        and bool(capabilities.resources.subscribe)
    )


def listens_for_updates(connection: Connection) -> bool:
    """Whether the session hears updates on a ``subscriptions/listen`` stream (2026-07-28), not
    by ``resources/subscribe``."""
    return connection.protocol in MODERN_PROTOCOL_VERSIONS


async def follow_resource_updates(connection: Connection, uris: Sequence[str]) -> None:
    """Hear updates of ``uris`` on a ``subscriptions/listen`` stream until it ends or is cancelled.

    Raises what the SDK raises when the stream cannot open or drops (``SubscriptionLost``,
    ``MCPError``, a transport error): the caller's boundary logs it; the reads go on as before.
    """
    updates = connection.resource_updates
    async with connection.listen_resources(uris) as subscription:
        async for event in subscription:
            if isinstance(event, ResourceUpdated):
                updates.heard(event.uri)


async def list_resources(connection: Connection, *, timeout: float, max_pages: int) -> ResourceListing:
    """The server's resources and templates, up to ``max_pages`` pages of each.

    A server that answers the templates' listing with an error lists resources only.

    Raises:
        RemoteError: as ``Connection.send``.
    """
    resources: list[mcp_types.Resource] = []
    truncated = False
    cursor: str | None = None
    for page_number in range(max_pages):
        page = await connection.send(
            mcp_types.ListResourcesRequest(params=mcp_types.PaginatedRequestParams(cursor=cursor)),
            mcp_types.ListResourcesResult,
            timeout=timeout,
        )
        resources += page.resources
        cursor = page.next_cursor
        if not cursor:
            break
        truncated = page_number == max_pages - 1
    templates: list[mcp_types.ResourceTemplate] = []
    cursor = None
    for page_number in range(max_pages):
        answer = await _templates_page(connection, cursor, timeout)
        if answer is None:
            break
        templates += answer.resource_templates
        cursor = answer.next_cursor
        if not cursor:
            break
        truncated = truncated or page_number == max_pages - 1
    return ResourceListing(tuple(resources), tuple(templates), truncated)


async def _templates_page(
    connection: Connection, cursor: str | None, timeout: float
) -> mcp_types.ListResourceTemplatesResult | None:
    try:
        return await connection.send(
            mcp_types.ListResourceTemplatesRequest(params=mcp_types.PaginatedRequestParams(cursor=cursor)),
            mcp_types.ListResourceTemplatesResult,
            timeout=timeout,
        )
    except (CallFailed, RemoteTimeout):
        raise
    except RemoteError:
        # Templates are optional: a server that answers their listing with an error (most often
        # "method not found") has none to offer, and its resources are listed all the same.
        return None


async def read_resource(connection: Connection, uri: str, *, timeout: float) -> mcp_types.ReadResourceResult:
    """Read ``uri`` from this connection's server, and nowhere else.

    Raises:
        RemoteError: as ``Connection.send`` (a result over the budget fails it clearly).
    """
    return await connection.send(
        mcp_types.ReadResourceRequest(params=mcp_types.ReadResourceRequestParams(uri=uri)),
        mcp_types.ReadResourceResult,
        timeout=timeout,
    )


async def subscribe_resource(connection: Connection, uri: str, *, timeout: float) -> bool:
    """Subscribe to ``uri`` once per connection, when the server offers it and the bound allows;
    whether the connection is subscribed to it now.

    Raises:
        RemoteError: as ``Connection.send``.
    """
    updates = connection.resource_updates
    if uri in updates.subscribed:
        return True
    if not offers_subscriptions(connection) or len(updates.subscribed) >= MAX_SUBSCRIPTIONS:
        return False
    if listens_for_updates(connection):
        # The stream's filter names the URIs: its follower opens it again with this one.
        updates.subscribed.add(uri)
        return True
    await connection.send(
        mcp_types.SubscribeRequest(params=mcp_types.SubscribeRequestParams(uri=uri)),
        mcp_types.EmptyResult,
        timeout=timeout,
    )
    updates.subscribed.add(uri)
    return True
