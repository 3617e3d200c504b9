"""``playa audit`` and ``playa db import``/``export`` with a chat's audit log in PostgreSQL.

The real commands against a real database: the operator verifies and exports the rows as the
file; a log moves between the data dir and the database only whole and verified, so a copy
never launders an edit or a cut.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from playa.db import Database, DatabaseStorage, DatabaseUrl, upgrade
from playa.mcp_remote import AuditKey, verify_log
from playa.mcp_remote.store import AuditLog, verify_rows
from support import cli_run
from support.audit import SECRET, edited, folder_of, lines_of, write_log
from support.cli_run import on_database

pytestmark = pytest.mark.anyio

SCOPE = "telegram:42"
BROKEN = "telegram:43"
KEY = AuditKey(SECRET.encode())


@pytest.fixture
async def storage(database_url: str) -> AsyncIterator[DatabaseStorage]:
    async with await Database.open(DatabaseUrl.parse(database_url)) as database:
        await upgrade(database)
        yield DatabaseStorage(database)


async def playa(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(lambda: cli_run.playa(*args, env=env))


async def write_rows(storage: DatabaseStorage, scope: str, count: int) -> None:
    async with anyio.create_task_group() as tg:
        log = AuditLog(None, scope, KEY, task_group=tg, rows=storage.audit)
        for n in range(count):
            log.record("tool_call", server="docs", tool=f"tool{n}", outcome="ok")
        await log.flush()


async def test_playa_audit_verifies_and_exports_the_log_in_the_database(
    storage: DatabaseStorage, database_url: str, tmp_path: Path
) -> None:
    env = on_database(database_url, SECRET)
    data_dir = str(tmp_path / "data")
    done = await playa(env, "audit", "verify", "--chat", SCOPE, "--data-dir", data_dir)
    assert done.returncode == 1
    assert f"chat {SCOPE} has no audit log in PostgreSQL at 127.0.0.1" in done.stderr

    await write_rows(storage, SCOPE, 3)
    done = await playa(env, "audit", "verify", "--chat", SCOPE, "--data-dir", data_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"The audit log of {SCOPE} is whole: 3 records, the last #3 at ")
    done = await playa(env, "audit", "export", "--chat", SCOPE, "--data-dir", data_dir)
    assert done.returncode == 0, done.stderr
    exported = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["seq"], r["fields"]["tool"]) for r in exported] == [(1, "tool0"), (2, "tool1"), (3, "tool2")]

    async with storage.database.connection() as connection:
        await connection.execute("DELETE FROM audit_records WHERE chat = $1 AND seq = 3", SCOPE)
    done = await playa(env, "audit", "verify", "--chat", SCOPE, "--data-dir", data_dir)
    assert done.returncode == 1
    assert (
        f"the audit log of {SCOPE} breaks at the log ends at record 2 but its head record says 3 "
        "were written (its tail was cut)"
    ) in done.stderr


async def test_db_import_and_export_carry_a_log_that_verifies_and_report_one_that_does_not(
    storage: DatabaseStorage, database_url: str, tmp_path: Path
) -> None:
    env = on_database(database_url, SECRET)
    source, target = tmp_path / "source", tmp_path / "target"
    folder = await write_log(source, SCOPE, 4)
    broken = await write_log(source, BROKEN, 3)
    lines = lines_of(broken)
    (broken / "audit.jsonl").write_bytes(b"".join([lines[0], edited(lines[1]), lines[2]]))

    for _ in range(2):  # a second run changes nothing
        done = await playa(env, "db", "import", "--data-dir", str(source))
        assert done.returncode == 1
        assert "4 audit records" in done.stdout
        assert (
            f"not moved: {BROKEN}: its audit log was not moved: it breaks at line 2: record 2 does not "
            "verify (edited, forged, or from another chat)"
        ) in done.stderr
    found = await verify_rows(storage.audit, SCOPE, KEY)
    assert found.ok, found.breaks
    _, rows = await storage.audit.read(SCOPE)
    assert [row + b"\n" for _, row in rows] == lines_of(folder)  # the file's very lines
    assert await storage.audit.read(BROKEN) == (None, [])

    await write_rows(storage, SCOPE, 2)  # the chat went on in the database
    done = await playa(env, "db", "export", "--data-dir", str(target))
    assert done.returncode == 0, done.stderr
    assert "6 audit records" in done.stdout
    exported = verify_log(folder_of(target, SCOPE), SCOPE, KEY)
    assert exported.ok, exported.breaks
    assert [r.seq for r in exported.records] == [1, 2, 3, 4, 5, 6]
    assert lines_of(folder_of(target, SCOPE))[:4] == lines_of(folder)

    # A database log that does not verify stays where it is.
    async with storage.database.connection() as connection:
        await connection.execute("DELETE FROM audit_records WHERE chat = $1 AND seq = 2", SCOPE)
    again = tmp_path / "again"
    done = await playa(env, "db", "export", "--data-dir", str(again))
    assert done.returncode == 1
    assert f"{SCOPE}: its audit log was not moved: it breaks at row 3: record 2 is missing" in done.stderr
    assert not await anyio.to_thread.run_sync((folder_of(again, SCOPE) / "audit.jsonl").exists)
