"""A chat that gets a new scope (a Telegram group become a supergroup) takes its servers and
history in the database along, sealed again for the new scope."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart

from playa.agent import History
from playa.db import Database, DatabaseStorage, upgrade
from playa.mcp_remote.store import HostSecret, RowMemory, RowServers, Sealer, ServerEntry
from support.host import remote_host

pytestmark = pytest.mark.anyio

SECRET = b"k" * 32
OLD, NEW = "telegram:-5", "telegram:-1005"
CLOSED = ServerEntry(
    "local", "http://127.0.0.1:9/mcp", auth_kind="bearer", headers={"Authorization": "Bearer x" * 3}
)


async def test_a_moved_chat_keeps_its_servers_and_history_in_the_database(
    database: Database, tmp_path: Path
) -> None:
    await upgrade(database)
    storage = DatabaseStorage(database)
    sealer = Sealer(SECRET)
    await RowServers(storage.servers, OLD, sealer, RowMemory()).save((CLOSED,))
    host = remote_host(tmp_path, HostSecret(SECRET, "MCP_ENCRYPTION_SECRET"), storage=storage)
    async with host:
        session = await host.session(OLD, owner="1")
        await host.history(session).extend(
            [ModelRequest.user_text_prompt("tangerine?"), ModelResponse(parts=[TextPart("yes")])]
        )
        assert await host.move_scope(OLD, NEW, owner="1") == "moved"
        moved = await host.session(NEW, owner="1")
        assert len(host.history(moved)) == 2
    now = await RowServers(storage.servers, NEW, sealer, RowMemory()).load()
    assert [e.name for e in now.entries] == ["local"] and now.warning is None
    assert dict(now.entries[0].headers) == dict(CLOSED.headers)
    assert (await RowServers(storage.servers, OLD, sealer, RowMemory()).load()).entries == ()
    assert len(await History.open_rows(storage.history, OLD)) == 0
    assert len(await History.open_rows(storage.history, NEW)) == 2
