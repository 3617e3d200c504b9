"""The host's writers behave alike over a folder and over PostgreSQL rows (``Workspace``).

A file a person sends and a resource blob take the same path rules, the same quota message and
the same refusals on either backend: a new file never overwrites one, a refused write leaves
nothing (not even a folder), a file never stands where a folder is, and the host's folder is
never listed nor written.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from playa.core import FolderWorkspace, RowWorkspace, Workspace, save_attachment, workspace_path
from playa.db import Database, DatabaseStorage, DatabaseUrl, upgrade
from playa.exceptions import WorkspaceError
from playa.mcp_remote._resource_files import save_blob

pytestmark = pytest.mark.anyio

QUOTA = 100
FULL = (
    "the workspace is full: writing 60 bytes would take it to 120 bytes, over its quota of 100 "
    "bytes; delete files first"
)


@pytest.fixture(params=["files", "postgres"])
async def workspaces(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Workspace, Workspace]]:
    """Two chats' workspaces on one backend, each with a quota of QUOTA bytes."""
    if request.param == "files":
        yield FolderWorkspace(tmp_path / "a", quota=QUOTA), FolderWorkspace(tmp_path / "b", quota=QUOTA)
        return
    async with await Database.open(DatabaseUrl.parse(request.getfixturevalue("database_url"))) as database:
        await upgrade(database)
        rows = DatabaseStorage(database).workspace
        yield RowWorkspace(rows, "telegram:1", quota=QUOTA), RowWorkspace(rows, "telegram:2", quota=QUOTA)


async def test_a_sent_file_is_numbered_beside_one_of_the_same_name_and_never_written_over(
    workspaces: tuple[Workspace, Workspace],
) -> None:
    mine, theirs = workspaces
    assert await save_attachment(mine, "data.csv", b"one") == "received/data.csv"
    assert await save_attachment(mine, "data.csv", b"two") == "received/data-2.csv"
    assert await save_attachment(theirs, "data.csv", b"three") == "received/data.csv"
    assert await mine.read("received/data.csv") == b"one"
    assert await mine.read("received/data-2.csv") == b"two"
    assert not await mine.write("received/data.csv", b"over", new=True)
    assert await mine.read("received/data.csv") == b"one"
    assert await mine.paths() == ["received/data-2.csv", "received/data.csv"]
    assert await mine.paths("received", limit=1) in (["received/data.csv"], ["received/data-2.csv"])
    assert await mine.read("received/none") is None


async def test_past_the_quota_a_sent_file_and_a_blob_are_refused_with_its_message_and_leave_nothing(
    workspaces: tuple[Workspace, Workspace],
) -> None:
    mine, theirs = workspaces
    await save_attachment(mine, "a.bin", b"a" * 60)
    with pytest.raises(WorkspaceError) as sent:
        await save_attachment(mine, "b.bin", b"b" * 60)
    with pytest.raises(WorkspaceError) as blob:
        await save_blob(mine, "docs", "docs://x.bin", None, b"c" * 60)
    assert str(sent.value) == str(blob.value) == FULL
    assert await mine.paths() == ["received/a.bin"]
    if isinstance(mine, FolderWorkspace):
        assert sorted(p.name for p in mine.root.iterdir()) == ["received"]  # no folder left behind
    # A file's own bytes are replaced, not added; the quota is each chat's own.
    assert await save_blob(mine, "docs", "docs://x.bin", None, b"c" * 40) == (
        await save_blob(mine, "docs", "docs://x.bin", None, b"d" * 40)
    )
    await save_attachment(theirs, "b.bin", b"b" * 60)


async def test_writes_at_once_from_every_writer_never_pass_the_quota_together(
    workspaces: tuple[Workspace, Workspace],
) -> None:
    mine, _ = workspaces
    tools = {tool.name: tool for tool in mine.tools()}
    outcomes: list[bool] = []

    async def attach(n: int) -> None:
        try:
            await save_attachment(mine, f"f{n}.bin", b"x" * 30)
            outcomes.append(True)
        except WorkspaceError:
            outcomes.append(False)

    async def write(n: int) -> None:
        result = await tools["write_file"].call({"path": f"w{n}.txt", "content": "x" * 30})
        outcomes.append(not result.is_error)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for n in range(3):
                tg.start_soon(attach, n)
                tg.start_soon(write, n)
    assert sum(outcomes) == 3 and len(await mine.paths()) == 3


@pytest.mark.parametrize(
    "path", [".volcanic/x", ".VOLCANIC/x", "../x", "/x", "C:\\x", "a/../../x", "", ".", "x\x00"]
)
async def test_no_writer_writes_outside_the_agents_files(
    workspaces: tuple[Workspace, Workspace], path: str
) -> None:
    mine, _ = workspaces
    with pytest.raises(WorkspaceError):
        await mine.write(path, b"x")
    assert await mine.paths() == []
    # A server's name is a folder's name under resources/: it stays there, or is refused.
    with contextlib.suppress(WorkspaceError):
        await save_blob(mine, path, "docs://x.bin", None, b"x")
    assert all(p.startswith("resources/") and ".volcanic" not in p.casefold() for p in await mine.paths())


async def test_a_file_never_stands_where_a_folder_is_nor_under_a_file(
    workspaces: tuple[Workspace, Workspace],
) -> None:
    mine, _ = workspaces
    await mine.write("received", b"a file")
    with pytest.raises((WorkspaceError, OSError)):
        await save_attachment(mine, "photo.jpg", b"x")
    await mine.write("notes/a.md", b"x")
    with pytest.raises((WorkspaceError, OSError)):
        await mine.write("notes", b"x")
    assert await mine.paths() == ["notes/a.md", "received"]


async def test_the_host_folder_is_never_listed(tmp_path: Path) -> None:
    workspace = FolderWorkspace(tmp_path)
    (tmp_path / ".volcanic" / "mcp").mkdir(parents=True)
    (tmp_path / ".volcanic" / "mcp" / "servers.json").write_text("{}")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / ".volcanic" / "mcp" / "servers.json")
    assert await workspace.paths() == ["notes/a.md"]
    with pytest.raises(WorkspaceError, match=r"\.volcanic/ holds the host's own files"):
        await workspace.paths(".volcanic")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("./\\:aAvVoOlLcCnNiI\x00 ~"), max_size=24) | st.text(max_size=24))
def test_the_key_of_a_row_never_leaves_the_chats_files(path: str) -> None:
    """A row is keyed by the session's scope and this path: whatever the model writes, it is a
    relative path without a ``..`` step or the host's folder, or it is refused."""
    try:
        key = workspace_path(path)
    except WorkspaceError:
        return
    assert not key.is_absolute() and ".." not in key.parts and "\x00" not in key.as_posix()
    assert all(part.casefold() != ".volcanic" for part in key.parts)
    assert "\\" not in key.as_posix() and not (len(key.as_posix()) > 1 and key.as_posix()[1] == ":")


async def test_the_host_folder_does_not_count_toward_the_agents_quota(tmp_path: Path) -> None:
    (tmp_path / ".volcanic" / "mcp").mkdir(parents=True)
    (tmp_path / ".volcanic" / "mcp" / "servers.json").write_bytes(b"s" * 500)
    workspace = FolderWorkspace(tmp_path, quota=QUOTA)
    assert await save_attachment(workspace, "a.bin", b"a" * 60) == "received/a.bin"
    with pytest.raises(WorkspaceError, match="would take it to 120 bytes"):
        await save_attachment(workspace, "b.bin", b"b" * 60)
