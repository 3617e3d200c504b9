from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from playa.agent import Host
from playa.core import ToolResult, resolve_in_workspace, scope_folder, workspace_tools
from playa.exceptions import WorkspaceError

pytestmark = pytest.mark.anyio


def tools(workspace: Path) -> dict[str, object]:
    return {t.name: t for t in workspace_tools(workspace)}


async def run(workspace: Path, name: str, **arguments: object) -> ToolResult:
    tool = {t.name: t for t in workspace_tools(workspace)}[name]
    return await tool.call(dict(arguments))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


async def test_files_are_written_read_listed_and_deleted_inside_the_workspace(workspace: Path) -> None:
    assert not (await run(workspace, "write_file", path="notes/a.txt", content="hello")).is_error
    assert (workspace / "notes" / "a.txt").read_text() == "hello"
    assert (await run(workspace, "read_file", path="notes/a.txt")).text == "hello"
    assert (await run(workspace, "list_files", path="notes")).text == "notes/a.txt"
    assert (await run(workspace, "list_files")).text == "notes/"
    assert not (await run(workspace, "delete_file", path="notes/a.txt")).is_error
    assert not (workspace / "notes" / "a.txt").exists()


@pytest.mark.parametrize("path", ["../x", "a/../../x", "..", "/etc/passwd", "C:\\x", "\\\\server\\share"])
async def test_paths_leaving_the_workspace_are_refused(workspace: Path, path: str) -> None:
    for name in ("read_file", "write_file", "delete_file"):
        result = await run(workspace, name, path=path, content="x")
        assert result.is_error, (name, path)
        assert "workspace" in result.text or "absolute" in result.text
    assert not (workspace.parent / "x").exists()


async def test_a_symlink_leading_outside_is_refused(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    os.symlink(outside, workspace / "link")
    os.symlink(outside / "secret.txt", workspace / "file-link")
    for path in ("link/secret.txt", "file-link"):
        result = await run(workspace, "read_file", path=path)
        assert result.is_error and "outside the workspace" in result.text
    result = await run(workspace, "write_file", path="link/new.txt", content="x")
    assert result.is_error
    assert not (outside / "new.txt").exists()
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_a_symlink_inside_the_workspace_is_followed(workspace: Path) -> None:
    (workspace / "real.txt").write_text("inside")
    os.symlink(workspace / "real.txt", workspace / "alias.txt")
    assert (await run(workspace, "read_file", path="alias.txt")).text == "inside"


async def test_bad_arguments_are_clear_errors(workspace: Path) -> None:
    result = await run(workspace, "read_file", path=3)
    assert result.is_error and "must be a string" in result.text
    result = await run(workspace, "read_file", path="missing.txt")
    assert result.is_error and "No such file" in result.text


def test_resolve_refuses_nul_bytes(workspace: Path) -> None:
    with pytest.raises(WorkspaceError):
        resolve_in_workspace(workspace, "a\x00b")


# The fence around the host's own files


def text_of(path: Path) -> str:
    return path.read_text()


@pytest.fixture
def store_file(workspace: Path) -> Path:
    path = workspace / ".volcanic" / "mcp" / "servers.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "servers": []}')
    return path


@pytest.mark.parametrize(
    "path",
    [
        ".volcanic/mcp/servers.json",
        ".volcanic/mcp",
        ".volcanic",
        "./.volcanic/mcp/servers.json",
        ".volcanic//mcp/servers.json",
        ".VOLCANIC/mcp/servers.json",
        ".Volcanic/mcp/servers.json",
        ".volcanic\\mcp\\servers.json",
        ".volcanic/mcp/new.json",
        "notes/../.volcanic/mcp/servers.json",
    ],
)
async def test_nothing_under_the_host_folder_can_be_listed_read_written_or_deleted(
    workspace: Path, store_file: Path, path: str
) -> None:
    for name in ("list_files", "read_file", "write_file", "delete_file"):
        result = await run(workspace, name, path=path, content="{}")
        assert result.is_error, (name, path)
        assert "holds the host's own files" in result.text or "'..'" in result.text
    assert text_of(store_file) == '{"version": 1, "servers": []}'
    assert sorted(os.listdir(store_file.parent)) == ["servers.json"]


async def test_listing_the_workspace_never_shows_the_host_folder(workspace: Path, store_file: Path) -> None:
    (workspace / "a.txt").write_text("a")
    os.symlink(workspace / ".volcanic", workspace / "door")
    assert (await run(workspace, "list_files")).text == "a.txt"
    assert (await run(workspace, "list_files", path=".")).text == "a.txt"


async def test_a_link_into_the_host_folder_is_refused_whatever_it_is_called(
    workspace: Path, store_file: Path
) -> None:
    os.symlink(workspace / ".volcanic", workspace / "door")
    os.symlink(store_file, workspace / "servers.json")
    os.symlink(workspace / ".volcanic" / "mcp", workspace / "mcp")
    for path in ("door/mcp/servers.json", "servers.json", "mcp/servers.json", "mcp", "door"):
        for name in ("list_files", "read_file", "write_file", "delete_file"):
            result = await run(workspace, name, path=path, content="{}")
            assert result.is_error and ".volcanic/" in result.text, (name, path)
    assert text_of(store_file) == '{"version": 1, "servers": []}'


async def test_a_file_named_like_the_host_folder_cannot_be_created_to_block_it(workspace: Path) -> None:
    for path in (".volcanic", ".VOLCANIC"):
        result = await run(workspace, "write_file", path=path, content="in the way")
        assert result.is_error
    assert os.listdir(workspace) == []


async def test_other_dot_folders_stay_usable(workspace: Path) -> None:
    assert not (await run(workspace, "write_file", path=".volcanicx/a", content="ok")).is_error
    assert not (await run(workspace, "write_file", path=".config/a", content="ok")).is_error
    assert (await run(workspace, "list_files")).text == ".config/\n.volcanicx/"


async def test_a_chats_private_folder_is_outside_its_workspace(offline_host: Host, data_dir: Path) -> None:
    session = await offline_host.session("console:private", owner="me")
    assert session.state_dir == data_dir / "sessions" / scope_folder("console:private")
    assert offline_host.history(session).path.parent == session.state_dir
    assert not session.state_dir.resolve().is_relative_to(session.workspace.resolve())


# Hard links: another local process can plant one to a file outside the workspace


async def test_a_file_with_another_hard_link_is_neither_read_nor_written(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("top secret")
    os.link(outside, workspace / "planted.txt")
    read = await run(workspace, "read_file", path="planted.txt")
    assert read.is_error and "hard links" in read.text
    assert "top secret" not in read.text
    written = await run(workspace, "write_file", path="planted.txt", content="overwritten")
    assert written.is_error and "hard links" in written.text
    # Refused before anything was written: the file outside is as it was, not even truncated.
    assert outside.read_text() == "top secret"
    # Deleting the planted link is allowed, and leaves the file outside alone.
    assert not (await run(workspace, "delete_file", path="planted.txt")).is_error
    assert outside.read_text() == "top secret"


async def test_a_hard_link_inside_the_workspace_is_refused_too_and_a_lone_file_is_fine(
    workspace: Path,
) -> None:
    # Whether the other name lies inside cannot be known without searching the disk.
    (workspace / "a.txt").write_text("one")
    os.link(workspace / "a.txt", workspace / "b.txt")
    assert (await run(workspace, "read_file", path="a.txt")).is_error
    os.unlink(workspace / "b.txt")
    assert (await run(workspace, "read_file", path="a.txt")).text == "one"
    assert not (await run(workspace, "write_file", path="a.txt", content="two")).is_error
    assert (workspace / "a.txt").read_text() == "two"


async def test_a_fifo_in_the_workspace_is_refused_not_waited_on(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    with anyio.fail_after(10):
        for name in ("read_file", "write_file"):
            result = await run(workspace, name, path="pipe", content="x")
            assert result.is_error, name
