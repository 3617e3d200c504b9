"""The agent's workspace tools behave alike over a folder and over PostgreSQL rows.

Same paths, same fence around the host's folder, same quota refusal: the model cannot tell
which backend keeps the chat's files, and a write past the quota loses nothing already there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from playa.core import Tool, ToolResult, workspace_row_tools, workspace_tools
from playa.db import Database, DatabaseStorage, DatabaseUrl, upgrade

pytestmark = pytest.mark.anyio

SCOPE = "telegram:123"
QUOTA = 1000


class Workspace:
    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {tool.name: tool for tool in tools}

    async def __call__(self, name: str, **arguments: str) -> ToolResult:
        return await self.tools[name].call(dict(arguments))

    async def text(self, name: str, **arguments: str) -> str:
        result = await self(name, **arguments)
        assert not result.is_error, result.text
        return result.text


@pytest.fixture(params=["files", "postgres"])
async def workspaces(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Workspace, Workspace]]:
    """Two chats' workspaces on one backend, each with a quota of QUOTA bytes."""
    if request.param == "files":
        yield (
            Workspace(workspace_tools(tmp_path / "a", quota=QUOTA)),
            Workspace(workspace_tools(tmp_path / "b", quota=QUOTA)),
        )
        return
    async with await Database.open(DatabaseUrl.parse(request.getfixturevalue("database_url"))) as database:
        await upgrade(database)
        rows = DatabaseStorage(database).workspace
        yield (
            Workspace(workspace_row_tools(rows, SCOPE, quota=QUOTA)),
            Workspace(workspace_row_tools(rows, "telegram:456", quota=QUOTA)),
        )


@pytest.fixture(autouse=True)
def _folders(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()


async def test_files_round_trip_and_list_by_folder(workspaces: tuple[Workspace, Workspace]) -> None:
    mine, theirs = workspaces
    assert await mine.text("list_files") == "(empty)"
    assert await mine.text("write_file", path="notes/today.md", content="tangerine ☀") == (
        f"wrote {len('tangerine ☀'.encode())} bytes to notes/today.md"
    )
    await mine.text("write_file", path="top.txt", content="x")
    assert await mine.text("read_file", path="notes/today.md") == "tangerine ☀"
    assert await mine.text("list_files") == "notes/\ntop.txt"
    assert await mine.text("list_files", path="notes") == "notes/today.md"
    assert await theirs.text("list_files") == "(empty)"  # one chat never sees another's files
    assert (await theirs("read_file", path="top.txt")).is_error
    assert await mine.text("delete_file", path="top.txt") == "deleted top.txt"
    assert (await mine("read_file", path="top.txt")).is_error
    assert (await mine("delete_file", path="notes")).is_error


@pytest.mark.parametrize(
    "path", [".volcanic/mcp/servers.json", ".VOLCANIC/x", "a/../../x", "/etc/passwd", "nul\x00byte"]
)
async def test_paths_outside_the_agents_files_are_refused(
    workspaces: tuple[Workspace, Workspace], path: str
) -> None:
    mine, _ = workspaces
    for tool, arguments in [
        ("write_file", {"path": path, "content": "x"}),
        ("read_file", {"path": path}),
        ("delete_file", {"path": path}),
    ]:
        result = await mine(tool, **arguments)
        assert result.is_error, (tool, path)
    listed = await mine("list_files", path=".volcanic")
    assert listed.is_error and ".volcanic/ holds the host's own files" in listed.text


async def test_a_write_past_the_quota_is_refused_clearly_and_loses_nothing(
    workspaces: tuple[Workspace, Workspace],
) -> None:
    mine, theirs = workspaces
    await mine.text("write_file", path="a.txt", content="a" * 600)
    refused = await mine("write_file", path="b.txt", content="b" * 500)
    assert refused.is_error
    assert refused.text == (
        "the workspace is full: writing 500 bytes would take it to 1100 bytes, over its quota of "
        "1000 bytes; delete files first"
    )
    assert (await mine("read_file", path="b.txt")).is_error  # nothing half written
    assert await mine.text("read_file", path="a.txt") == "a" * 600
    await mine.text("write_file", path="a.txt", content="c" * 900)  # a file's own bytes are replaced
    await theirs.text("write_file", path="a.txt", content="d" * 900)  # the quota is per chat


async def test_writes_at_once_never_pass_the_quota_together(workspaces: tuple[Workspace, Workspace]) -> None:
    mine, _ = workspaces
    results: list[ToolResult] = []

    async def write(n: int) -> None:
        results.append(await mine("write_file", path=f"f{n}.txt", content="x" * 300))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for n in range(6):
                tg.start_soon(write, n)
    assert sum(not r.is_error for r in results) == 3
    listed = (await mine.text("list_files")).splitlines()
    assert len(listed) == 3
