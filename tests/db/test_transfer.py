"""``playa db import`` / ``playa db export``: a data dir's chats into the database and back.

The real command against a real database: idempotent both ways, a broken entry reported while
the rest moves, the servers verifying on the other side, no credential in clear in a table.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart

from playa.agent import History
from playa.core import scope_folder, session_state_dir
from playa.db import Database, DatabaseUrl
from playa.mcp_remote.store import Sealer, ServerStore, resolve_host_secret, store_path
from support.cli_run import on_database, playa
from support.db_text import database_text
from support.store import CANARY, DOCS, OPEN

pytestmark = pytest.mark.anyio

SCOPE = "telegram:123"


async def everything(database_url: str) -> str:
    async with await Database.open(DatabaseUrl.parse(database_url)) as database:
        return await database_text(database)


async def test_chats_move_into_the_database_and_back_and_a_broken_entry_is_reported(
    database_url: str, tmp_path: Path
) -> None:
    text = secrets.token_hex(32)
    env = on_database(database_url, text)
    secret = resolve_host_secret({"MCP_ENCRYPTION_SECRET": text}, data_dir=tmp_path, allow_generate=False)
    assert not isinstance(secret, str) and hasattr(secret, "value")
    sealer = Sealer(secret.value)

    source = tmp_path / "source"
    workspace = source / "workspaces" / scope_folder(SCOPE)
    state = session_state_dir(source, SCOPE)
    ServerStore(workspace, SCOPE, sealer).save((DOCS, OPEN))
    doc = json.loads(store_path(workspace).read_text())
    forged = dict(doc["servers"][1], name="forged", url="https://attacker.example/")
    doc["servers"].append(forged)
    store_path(workspace).write_text(json.dumps(doc))
    history = await History.open(state)
    await history.extend(
        [ModelRequest.user_text_prompt("tangerine?"), ModelResponse(parts=[TextPart("yes")])]
    )
    (source / "sessions" / "cut~0123").mkdir()  # a long scope's folder: its chat cannot be named

    assert playa("db", "upgrade", env=env).returncode == 0
    done = playa("db", "import", "--data-dir", str(source), env=env)
    out, err = done.stdout, done.stderr
    assert done.returncode == 1
    assert "imported into the database: 1 chats, 2 servers, 2 messages of history" in out
    assert f"not moved: {SCOPE}: server forged was not moved: seal does not verify" in err
    assert "not moved: cut~0123: not a chat's folder" in err
    first = await everything(database_url)
    assert "tangerine" in first and "docs.example" in first
    assert CANARY not in first

    assert playa("db", "import", "--data-dir", str(source), env=env).stdout == out  # again: the same
    second = await everything(database_url)
    assert len(second.splitlines()) == len(first.splitlines())
    assert [line for line in second.splitlines() if line.startswith("history")] == [
        line for line in first.splitlines() if line.startswith("history")
    ]

    target = tmp_path / "target"
    for _ in range(2):  # idempotent this way too
        done = playa("db", "export", "--data-dir", str(target), env=env)
        out = done.stdout
        assert (done.returncode, done.stderr) == (0, "")
        assert f"exported into {target}: 1 chats, 2 servers, 2 messages of history" in out
    exported = ServerStore(
        target / "workspaces" / scope_folder(SCOPE), SCOPE, sealer, state_dir=session_state_dir(target, SCOPE)
    ).load()
    assert exported.warning is None and exported.rejected == ()
    docs = exported.entry("docs")
    assert docs is not None and dict(docs.headers) == dict(DOCS.headers)
    assert sorted(e.name for e in exported.entries) == ["docs", "open"]
    kept = await History.open(session_state_dir(target, SCOPE))
    assert [m.parts[0].content for m in kept.messages] == ["tangerine?", "yes"]  # type: ignore[union-attr]
