"""Resources of a server written by others: `@modelcontextprotocol/server-everything`, both transports.

Its static documents, its text and blob templates, its tool that returns resource links, and
its subscriptions: a read subscribes, and the server's ``notifications/resources/updated``
(``toggle-subscriber-updates`` starts them) marks the resource for the agent's next listing and read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import anyio
import pytest

from playa.agent import Host
from playa.mcp_remote import HostSecret, RemoteMcpExtension, RemoteMcpSettings
from servers.node import server_everything
from support.host import HEALTHY, remote_host
from support.offline_turns import call, owner_says

pytestmark = [pytest.mark.anyio, pytest.mark.npm]

SCOPE = "console:everything-resources"
WAIT = 60.0
SETTINGS = RemoteMcpSettings(connection=HEALTHY)
DOCUMENT = "demo://resource/static/document/architecture.md"


async def say(host: Host, line: str) -> str:
    return await owner_says(host, SCOPE, line, within=WAIT)


def read(uri: str) -> str:
    """The agent's ``read_resource`` of ``uri`` on server-everything."""
    return call("read_resource", server="everything", uri=uri)


@pytest.fixture(params=["streamable-http", "sse"])
async def host(
    request: pytest.FixtureRequest, tmp_path: Path, host_secret: HostSecret
) -> AsyncIterator[Host]:
    """A host whose owner added server-everything over each transport."""
    transport: Literal["streamable-http", "sse"] = request.param
    async with (
        server_everything(transport) as url,
        remote_host(tmp_path, host_secret, settings=SETTINGS) as host,
    ):
        added = await say(host, f"/mcp_add everything {url}")
        assert added.startswith("Added everything: connected"), added
        yield host


async def test_server_everything_resources_templates_links_and_blobs(host: Host) -> None:
    listed = await say(host, "list_resources")
    assert f"- {DOCUMENT} — architecture.md, text/markdown" in listed, listed
    assert "- template demo://resource/dynamic/text/{resourceId} — Dynamic Text Resource" in listed
    assert "- template demo://resource/dynamic/blob/{resourceId} — Dynamic Blob Resource" in listed

    document = await say(host, read(DOCUMENT))
    assert f"[text {DOCUMENT} (text/markdown)]" in document
    assert "(subscribed: list_resources marks it if everything says it changed)" in document

    links = await say(host, call("everything__get-resource-links", count=2))
    blob_uri = "demo://resource/dynamic/blob/1"
    assert f'(open it with read_resource {{"server": "everything", "uri": "{blob_uri}"}})' in links, links

    blob = await say(host, read(blob_uri))
    session = await host.session(SCOPE, owner="owner")
    (saved,) = (session.workspace / "resources" / "everything").iterdir()
    assert saved.name.startswith("1-") and saved.suffix == ".txt"
    assert f"saved in the workspace as resources/everything/{saved.name}]" in blob
    assert saved.read_bytes().startswith(b"Resource 1: This is a base64 blob created at ")

    text = await say(host, read("demo://resource/dynamic/text/2"))
    assert "Resource 2: This is a plaintext resource created at " in text


async def test_an_update_of_a_resource_the_agent_read_marks_it_until_it_is_read_again(host: Host) -> None:
    unread = "demo://resource/static/document/features.md"
    await say(host, read(DOCUMENT))
    listed = await say(host, "list_resources")
    assert "(changed since you read it)" not in listed

    session = await host.session(SCOPE, owner="owner")
    (extension,) = host.extensions
    assert isinstance(extension, RemoteMcpExtension)
    connection = extension.chat(session).servers["everything"].connection
    assert connection is not None
    assert connection.resource_updates.subscribed == {DOCUMENT}

    # The server sends an update for each subscribed resource at once, then every 5 s.
    with anyio.fail_after(WAIT):
        started = await say(host, "everything__toggle-subscriber-updates")
        assert "Started simulated resource updated notifications" in started
        while DOCUMENT not in connection.resource_updates.changed:
            await connection.resource_updates.wait()

    listed = await say(host, "list_resources")
    assert f"- {DOCUMENT} (changed since you read it) — architecture.md" in listed
    assert f"- {unread} (changed" not in listed

    again = await say(host, read(DOCUMENT))
    assert f"Resource {DOCUMENT} of everything (it changed since you last read it):" in again
    assert DOCUMENT not in connection.resource_updates.changed
    await say(host, "everything__toggle-subscriber-updates")
