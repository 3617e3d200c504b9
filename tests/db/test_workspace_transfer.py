"""``playa db import`` / ``playa db export`` carry the chats' workspace files, each by its own rules.

The real command against a real database: the files move both ways, byte for byte, idempotently;
the host's folder stays behind; a link, a special file or a name no workspace may hold is
reported and skipped while the rest moves; a row whose path would lead out of the folder (a
tampered database) is reported and never written.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from playa.core import scope_folder
from playa.db import Database, DatabaseStorage, DatabaseUrl
from support.cli_run import on_database, playa

pytestmark = pytest.mark.anyio

SCOPE, ONLY_FILES = "telegram:123", "telegram:999"
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8 + b"\xff\xd9"


def files_in(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


async def test_workspace_files_move_into_the_database_and_back_and_what_cannot_move_is_reported(
    database_url: str, tmp_path: Path
) -> None:
    env = on_database(database_url, secrets.token_hex(32))
    source = tmp_path / "source"
    workspace = source / "workspaces" / scope_folder(SCOPE)
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "plan.md").write_text("tangerine ☀")
    (workspace / "received").mkdir()
    (workspace / "received" / "photo.jpg").write_bytes(JPEG)
    (workspace / ".volcanic").mkdir()
    (workspace / ".volcanic" / "host-only.txt").write_text("the host's")
    outside = tmp_path / "outside.txt"
    outside.write_text("not the chat's")
    (workspace / "link.txt").symlink_to(outside)
    os.mkfifo(workspace / "pipe")
    (workspace / os.fsdecode(b"bad\xff.txt")).write_text("a name that is not UTF-8")

    assert playa("db", "upgrade", env=env).returncode == 0
    done = playa("db", "import", "--data-dir", str(source), env=env)
    out, err = done.stdout, done.stderr
    assert done.returncode == 1, err
    assert "imported into the database: 1 chats, 0 servers, 0 messages of history, 2 workspace files" in out
    assert f"not moved: {SCOPE}: file 'link.txt' was not moved: not a regular file" in err
    assert f"not moved: {SCOPE}: file 'pipe' was not moved: not a regular file" in err
    assert f"not moved: {SCOPE}: file 'bad\\udcff.txt' was not moved: its name is not UTF-8" in err
    assert playa("db", "import", "--data-dir", str(source), env=env).stdout == out  # again: the same

    async with await Database.open(DatabaseUrl.parse(database_url)) as database:
        rows = DatabaseStorage(database).workspace
        assert await rows.paths(SCOPE, "") == ["notes/plan.md", "received/photo.jpg"]
        assert await rows.read(SCOPE, "received/photo.jpg") == JPEG
        # A chat that has only files, and rows a tampered database could hold.
        await rows.write(ONLY_FILES, "a.txt", b"only files", quota=None)
        async with database.connection() as connection:
            for path in ("../escape.txt", ".volcanic/mcp/servers.json", "x/../../escape.txt"):
                await connection.execute(
                    "INSERT INTO workspace_files (chat, path, content) VALUES ($1, $2, 'x')", SCOPE, path
                )

    target = tmp_path / "target"
    done = playa("db", "export", "--data-dir", str(target), env=env)
    out, err = done.stdout, done.stderr
    assert done.returncode == 1, err
    assert f"exported into {target}: 2 chats, 0 servers, 0 messages of history, 3 workspace files" in out
    assert f"{SCOPE}: file '../escape.txt' was not moved: '../escape.txt' contains '..'" in err
    assert f"{SCOPE}: file '.volcanic/mcp/servers.json' was not moved: .volcanic/ holds the host's own" in err
    assert files_in(target / "workspaces" / scope_folder(SCOPE)) == {
        "notes/plan.md": "tangerine ☀".encode(),
        "received/photo.jpg": JPEG,
    }
    assert files_in(target / "workspaces" / scope_folder(ONLY_FILES)) == {"a.txt": b"only files"}
    assert not (tmp_path / "escape.txt").exists() and not (target / "escape.txt").exists()
    assert not (target / "workspaces" / "escape.txt").exists()
    assert playa("db", "export", "--data-dir", str(target), env=env).stdout == out  # again: the same
