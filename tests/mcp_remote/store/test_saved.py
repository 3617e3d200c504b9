"""A write says what it wrote, and whether the writer's view of the file, with it, is the file."""

from __future__ import annotations

import json
from pathlib import Path

from playa.mcp_remote.store import Sealer, ServerEntry, ServerStore, store_path

SCOPE = "console:t"


def stores(tmp_path: Path, *, private: bool = True) -> tuple[ServerStore, ServerStore]:
    """Two stores of one chat's file (two processes of one host), sharing its private record
    (without one, ``private`` False, each entry is judged by itself)."""
    sealer = Sealer(b"k" * 32)
    workspace, state = tmp_path / "ws", tmp_path / "state" if private else None
    return (
        ServerStore(workspace, SCOPE, sealer, state_dir=state),
        ServerStore(workspace, SCOPE, sealer, state_dir=state),
    )


def test_a_put_after_a_load_is_taken_without_reading_the_file_back(tmp_path: Path) -> None:
    store, _ = stores(tmp_path)
    store.load()
    entry = ServerEntry(
        name="docs", url="https://docs.example/mcp", auth_kind="headers", headers={"X-Key": "abcdefgh12"}
    )
    saved = store.put(entry)
    assert saved.entry is entry
    assert saved.follows is not None
    assert store.changed()  # until the writer says it took the change
    store.taken(saved)
    assert not store.changed()
    assert store.load().entries == (entry,)


def test_a_put_after_another_writers_change_must_be_read_back(tmp_path: Path) -> None:
    store, other = stores(tmp_path)
    store.load()
    other.put(ServerEntry(name="other", url="https://other.example/mcp"))
    saved = store.put(ServerEntry(name="docs", url="https://docs.example/mcp"))
    assert saved.follows is None
    store.taken(saved)
    assert store.changed()
    assert [e.name for e in store.load().entries] == ["other", "docs"]


def test_a_put_never_loaded_or_over_a_rejected_entry_must_be_read_back(tmp_path: Path) -> None:
    store, _ = stores(tmp_path, private=False)
    assert store.put(ServerEntry(name="first", url="https://first.example/mcp")).follows is None
    # An entry that fails verification: a write moves the entries after it, and their numbers.
    path = store_path(tmp_path / "ws")
    doc = json.loads(path.read_text())
    doc["servers"].insert(0, {"name": "junk"})
    path.write_text(json.dumps(doc))
    fresh, _ = stores(tmp_path, private=False)
    assert fresh.load().rejected
    assert fresh.put(ServerEntry(name="docs", url="https://docs.example/mcp")).follows is None


def test_what_a_write_did_compares_by_its_outcome_not_by_what_it_wrote(tmp_path: Path) -> None:
    store, _ = stores(tmp_path)
    store.load()
    one = store.put(ServerEntry(name="docs", url="https://docs.example/mcp"))
    two = store.put(ServerEntry(name="docs", url="https://docs.example/v2/mcp"))
    assert (one.changed, two.changed) == (False, True)
    assert one != two and one.entry != two.entry
