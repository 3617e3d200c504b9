"""``PLAYA_WORKSPACE_QUOTA`` reaches each chat's workspace tools, per chat."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.host import new_host

pytestmark = pytest.mark.anyio


async def test_each_chats_workspace_tools_refuse_a_write_past_the_hosts_quota(tmp_path: Path) -> None:
    async with new_host(tmp_path, workspace_quota=100) as host:
        mine = await host.session("console:mine", owner="me")
        theirs = await host.session("console:theirs", owner="them")
        write = mine.tools.get("write_file")
        assert not (await write.call({"path": "a.txt", "content": "a" * 80})).is_error
        refused = await write.call({"path": "b.txt", "content": "b" * 30})
        assert refused.is_error and "over its quota of 100 bytes" in refused.text
        assert not (mine.workspace / "b.txt").exists()
        assert not (
            await theirs.tools.get("write_file").call({"path": "b.txt", "content": "b" * 30})
        ).is_error
