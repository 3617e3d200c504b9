"""A chat's audit log as the store keeps it: every tamper is found by ``playa audit verify``,
the chain goes on across restarts and cuts, a record holds only short scalar fields.

The log is written by the chat's ``AuditLog`` (a worker thread, batched); the verifier runs as
the operator runs it, a ``playa`` process with the host secret in its environment.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from playa.mcp_remote import AuditKey, verify_log
from playa.mcp_remote.store import AuditLog, read_records
from support.audit import (
    ARGUMENT_CANARY,
    HEADER_CANARY,
    SCOPE,
    SECRET,
    edited,
    folder_of,
    lines_of,
    playa_audit,
    write_log,
)

pytestmark = pytest.mark.anyio


# Each tamper: the log's lines (and another chat's) in, the lines written back out, and the line
# (1-based; 0 for the head record) where the verifier must say the chain breaks.
Tamper = Callable[[list[bytes], list[bytes]], list[bytes]]
TAMPERS: dict[str, tuple[Tamper, int]] = {
    "edited": (lambda lines, other: [*lines[:2], edited(lines[2]), *lines[3:]], 3),
    "deleted": (lambda lines, other: [*lines[:2], *lines[3:]], 3),
    "reordered": (lambda lines, other: [*lines[:2], lines[3], lines[2], *lines[4:]], 3),
    "replayed from an earlier position": (lambda lines, other: [*lines[:4], lines[1], *lines[4:]], 5),
    "replayed at its own position from another chat": (
        lambda lines, other: [*lines[:2], other[2], *lines[3:]],
        3,
    ),
    "appended from another chat": (lambda lines, other: [*lines, other[-1]], 7),
    "tail cut": (lambda lines, other: lines[:4], 0),
    "emptied": (lambda lines, other: [], 0),
}


async def test_an_untouched_log_verifies_and_exports_as_json_lines(data_dir: Path, tmp_path: Path) -> None:
    await write_log(data_dir, SCOPE, 6)
    done = await anyio.to_thread.run_sync(lambda: playa_audit("verify", "--chat", SCOPE, data_dir=data_dir))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"The audit log of {SCOPE} is whole: 6 records, the last #6 at ")
    out = tmp_path / "export.jsonl"
    done = await anyio.to_thread.run_sync(
        lambda: playa_audit("export", "--chat", SCOPE, "-o", str(out), data_dir=data_dir)
    )
    assert done.returncode == 0, done.stderr
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["seq"], r["kind"], r["fields"]["tool"]) for r in exported] == [
        (n + 1, "tool_call", f"tool{n}") for n in range(6)
    ]


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
async def test_playa_audit_verify_says_where_a_tampered_log_breaks(data_dir: Path, tamper: str) -> None:
    folder = await write_log(data_dir, SCOPE, 6)
    other = await write_log(data_dir, "console:other", 6)
    change, line = TAMPERS[tamper]
    (folder / "audit.jsonl").write_bytes(b"".join(change(lines_of(folder), lines_of(other))))
    done = await anyio.to_thread.run_sync(lambda: playa_audit("verify", "--chat", SCOPE, data_dir=data_dir))
    assert done.returncode == 1, done.stdout
    where = f"line {line}: " if line else ""
    assert f"playa: the audit log of {SCOPE} breaks at {where}" in done.stderr, done.stderr
    # Export writes what verifies, and fails all the same.
    done = await anyio.to_thread.run_sync(lambda: playa_audit("export", "--chat", SCOPE, data_dir=data_dir))
    assert done.returncode == 1 and "breaks at" in done.stderr


async def test_a_head_record_copied_from_another_chat_or_deleted_is_found(data_dir: Path) -> None:
    folder = await write_log(data_dir, SCOPE, 3)
    other = await write_log(data_dir, "console:other", 3)
    (folder / "audit.head.json").write_bytes((other / "audit.head.json").read_bytes())
    found = verify_log(folder, SCOPE, AuditKey(SECRET.encode()))
    assert [str(b) for b in found.breaks] == [
        "the head record does not verify (edited, or copied from another chat)"
    ]
    (folder / "audit.head.json").unlink()
    found = verify_log(folder, SCOPE, AuditKey(SECRET.encode()))
    assert [str(b) for b in found.breaks] == ["the head record is missing"]


async def test_the_chain_goes_on_across_restarts_and_a_cut_tail_stays_visible(data_dir: Path) -> None:
    key = AuditKey(SECRET.encode())
    folder = await write_log(data_dir, SCOPE, 3)
    await write_log(data_dir, SCOPE, 2)  # a new process: the chain goes on where it ended
    found = verify_log(folder, SCOPE, key)
    assert found.ok and [r.seq for r in found.records] == [1, 2, 3, 4, 5]
    # The tail is cut while the chat is away; its next records follow the head, not the cut log.
    (folder / "audit.jsonl").write_bytes(b"".join(lines_of(folder)[:3]))
    await write_log(data_dir, SCOPE, 1)
    found = verify_log(folder, SCOPE, key)
    assert [str(b) for b in found.breaks] == [
        "line 4: record 4 to 5 is missing before record 6 (deleted or reordered)"
    ]


async def test_a_log_whose_head_was_removed_says_so_in_its_next_record(data_dir: Path) -> None:
    folder = await write_log(data_dir, SCOPE, 2)
    (folder / "audit.head.json").unlink()
    await write_log(data_dir, SCOPE, 1)
    records = read_records(folder)
    assert [(r.seq, r.kind) for r in records] == [
        (1, "tool_call"),
        (2, "tool_call"),
        (3, "audit_head_lost"),
        (4, "tool_call"),
    ]
    assert records[2].fields == {"why": "missing", "last_seq": 2}


async def test_a_record_holds_only_short_scalar_fields_with_known_secrets_redacted(data_dir: Path) -> None:
    folder = folder_of(data_dir, SCOPE)
    async with anyio.create_task_group() as tg:
        log = AuditLog(
            folder,
            SCOPE,
            AuditKey(SECRET.encode()),
            task_group=tg,
            redact=lambda t: t.replace(HEADER_CANARY, "[redacted]"),
        )
        with pytest.raises(TypeError):
            log.record("tool_call", arguments={"text": ARGUMENT_CANARY})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="short lower-case name"):
            log.record("Tool Call")
        log.record("tool_call", server=f"named {HEADER_CANARY}", tool="t" * 500)
        # Names once checked are not checked again; a new one beside them still is.
        bad: list[tuple[str, dict[str, str | int]]] = [
            ("Tool Call", {"server": "a"}),
            ("tool_call", {"server": "a", "Bad": 1}),
        ]
        for kind, fields in bad:
            with pytest.raises(ValueError, match="short lower-case name"):
                log.record(kind, **fields)
        await log.flush()
    (record,) = read_records(folder)
    assert record.fields["server"] == "named [redacted]"
    assert record.fields["tool"] == "t" * 199 + "…"


async def test_the_latest_records_are_read_from_the_end_of_a_long_log_and_each_is_checked(
    data_dir: Path,
) -> None:
    folder = await write_log(data_dir, SCOPE, 1000)  # over 64 KiB: read in several chunks
    lines = lines_of(folder)
    (folder / "audit.jsonl").write_bytes(b"".join([*lines[:-2], edited(lines[-2]), lines[-1]]))
    async with anyio.create_task_group() as tg:
        log = AuditLog(folder, SCOPE, AuditKey(SECRET.encode()), task_group=tg)
        latest = await log.latest(300)
        one = await log.latest(1)
    assert [r.seq for r, _ in latest] == list(range(701, 1001))
    # Each is checked as it is shown: the edited one is marked.
    assert [r.seq for r, verified in latest if not verified] == [999]
    assert [(r.seq, verified) for r, verified in one] == [(1000, True)]


async def test_a_record_after_the_host_stopped_is_dropped_and_logged_not_raised(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = folder_of(data_dir, SCOPE)
    async with anyio.create_task_group() as tg:
        log = AuditLog(folder, SCOPE, AuditKey(SECRET.encode()), task_group=tg)
    log.record("tool_call", server="docs")
    await log.flush()
    assert "an audit record of console:audited after the host stopped was lost" in caplog.text
    assert not (folder / "audit.jsonl").exists()
