"""Where a binary resource is written: a safe name in the workspace, whatever the server's URI, and no link followed."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from playa.core import FolderWorkspace
from playa.exceptions import WorkspaceError
from playa.mcp_remote._resource_files import MAX_FILES, safe_name
from playa.mcp_remote._resource_files import save_blob as save_in


async def save_blob(folder: Path, server: str, uri: str, mime: str | None, data: bytes) -> str:
    """``save_blob`` into the workspace folder ``folder``."""
    return await save_in(FolderWorkspace(folder), server, uri, mime, data)


@pytest.mark.parametrize(
    ("uri", "mime", "start", "suffix"),
    [
        ("docs://files/report.pdf", "application/pdf", "report-", ".pdf"),
        ("docs://files/../../.volcanic/mcp/servers.json", None, "servers-", ".json"),
        ("file:///etc/..", None, "resource-", ".bin"),
        ("demo://resource/dynamic/blob/1", "text/plain", "1-", ".txt"),
        ("s3://bucket/a%2F..%2F..%2Fescape", "image/png", "a-.-.-escape-", ".png"),
        ("weird://[not-a-host/x y?.z", "application/octet-stream", "x-y-", ".z"),
        ("docs://x/archive.tar.gz", None, "archive.tar-", ".gz"),
        ("docs://x/page.html?print=1", "text/html", "page-", ".html"),
        ("", None, "resource-", ".bin"),
    ],
)
def test_a_name_is_made_from_the_uris_last_segment_and_a_digest(
    uri: str, mime: str | None, start: str, suffix: str
) -> None:
    name = safe_name(uri, mime)
    assert name.startswith(start) and name.endswith(suffix), name
    assert safe_name(uri, mime) == name


@given(st.text(max_size=300), st.one_of(st.none(), st.text(max_size=40)))
def test_no_uri_makes_a_name_that_leaves_its_folder_or_hides(uri: str, mime: str | None) -> None:
    name = safe_name(uri, mime)
    assert "/" not in name and "\\" not in name and "\0" not in name
    assert not name.startswith(".") and name not in ("", ".", "..")
    assert len(name) <= 100


def test_two_uris_never_share_a_file() -> None:
    assert safe_name("a://x/report.pdf", None) != safe_name("b://x/report.pdf", None)


@pytest.mark.anyio
async def test_a_blob_is_written_under_its_server_folder(tmp_path: Path) -> None:
    relative = await save_blob(tmp_path, "docs", "docs://r/../a.bin", None, b"\x00data")
    assert relative.startswith("resources/docs/a-") and (tmp_path / relative).read_bytes() == b"\x00data"
    again = await save_blob(tmp_path, "docs", "docs://r/../a.bin", None, b"new")
    assert again == relative and (tmp_path / relative).read_bytes() == b"new"
    assert [path.name for path in (tmp_path / "resources" / "docs").iterdir()] == [Path(relative).name]


@pytest.mark.anyio
async def test_a_folder_linked_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "resources").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceError, match="leads outside the workspace"):
        await save_blob(workspace, "docs", "docs://a.bin", None, b"data")
    assert list(outside.iterdir()) == []


@pytest.mark.anyio
async def test_a_folder_linked_into_the_host_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".volcanic").mkdir()
    (tmp_path / "resources").symlink_to(tmp_path / ".volcanic", target_is_directory=True)
    with pytest.raises(WorkspaceError, match=r"\.volcanic/ holds the host's own files"):
        await save_blob(tmp_path, "docs", "docs://a.bin", None, b"data")
    assert list((tmp_path / ".volcanic").iterdir()) == []


@pytest.mark.anyio
async def test_a_link_where_the_file_goes_is_replaced_not_written_through(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "workspace", tmp_path / "outside.txt"
    outside.write_bytes(b"keep")
    (workspace / "resources" / "docs").mkdir(parents=True)
    planted = workspace / "resources" / "docs" / safe_name("docs://a.bin", None)
    hard = workspace / "resources" / "docs" / safe_name("docs://b.bin", None)
    planted.symlink_to(workspace / "resources" / "docs" / "elsewhere")
    hard.hardlink_to(outside)
    await save_blob(workspace, "docs", "docs://a.bin", None, b"new a")
    await save_blob(workspace, "docs", "docs://b.bin", None, b"new b")
    assert not planted.is_symlink() and planted.read_bytes() == b"new a"
    assert hard.read_bytes() == b"new b" and outside.read_bytes() == b"keep"


@pytest.mark.anyio
async def test_a_servers_folder_takes_a_bounded_number_of_files_and_a_known_one_is_still_replaced(
    tmp_path: Path,
) -> None:
    for number in range(MAX_FILES):
        await save_blob(tmp_path, "docs", f"docs://page/{number}", None, b"x")
    with pytest.raises(WorkspaceError, match=f"resources/docs/ already holds {MAX_FILES} files"):
        await save_blob(tmp_path, "docs", "docs://page/one-more", None, b"x")
    assert (
        tmp_path / (await save_blob(tmp_path, "docs", "docs://page/0", None, b"new"))
    ).read_bytes() == b"new"
    assert (await save_blob(tmp_path, "other", "docs://page/one-more", None, b"x")).startswith(
        "resources/other/"
    )
