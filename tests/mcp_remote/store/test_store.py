"""The server store's API: entries round-trip, writes replace only what they touch, changes are noticed;
and the backends fill the seams the service uses."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from playa.exceptions import StoreError
from playa.mcp_remote.store import (
    AuditLog,
    AuditTrail,
    EntryWriter,
    LoadResult,
    Pins,
    Saved,
    ServerEntry,
    ServerStorage,
    ServerStore,
    store_path,
)
from support.store import ALL, CANARY, DOCS, FORGED, OPEN, WIKI, doc_of, edit, new_store, reasons

# --- round trip ---------------------------------------------------------------------------


def test_saved_entries_load_back_with_their_headers(store: ServerStore) -> None:
    result = store.load()
    assert result.entries == ALL
    assert result.rejected == ()
    assert result.warning is None
    assert dict(result.entries[0].headers) == {"Authorization": f"Bearer {CANARY}"}
    assert result.entries[1].tools == ("search", "read")
    assert result.entries[2].tools == ()


def test_the_file_holds_visible_fields_and_header_names_but_no_header_value(store: ServerStore) -> None:
    text = store.path.read_text()
    assert CANARY not in text
    entry = doc_of(store)["servers"][1]
    assert entry["name"] == "wiki"
    assert entry["url"] == "http://127.0.0.1:8000/mcp"
    assert entry["transport"] == "streamable-http"
    assert entry["tools"] == ["search", "read"]
    assert entry["auth"] == {"kind": "headers", "headers": ["X-Api-Key"]}
    assert set(entry["seal"]) == {"v", "kid", "nonce", "ct"}
    assert doc_of(store)["version"] == 1


def test_the_file_lives_in_the_workspace_volcanic_folder(tmp_path: Path, store: ServerStore) -> None:
    assert store.path == tmp_path / ".volcanic" / "mcp" / "servers.json" == store_path(tmp_path)
    assert store.path.is_file()


def test_the_file_has_mode_0600(store: ServerStore) -> None:
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    store.put(DOCS)
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


def test_an_atomic_write_leaves_no_temporary_file_behind(store: ServerStore) -> None:
    store.put(ServerEntry("more", "https://more.example/"))
    store.remove("docs")
    assert sorted(os.listdir(store.path.parent)) == ["servers.json"]


def test_a_missing_file_means_no_servers_and_no_warning(tmp_path: Path) -> None:
    result = new_store(tmp_path).load()
    assert result == LoadResult()


# --- put / remove / save ----------------------------------------------------------------------


def test_put_adds_an_entry_and_creates_the_folders(tmp_path: Path) -> None:
    s = new_store(tmp_path / "new-workspace")
    assert s.put(DOCS).changed is False
    assert s.load().entries == (DOCS,)
    assert stat.S_IMODE(s.path.parent.stat().st_mode) == 0o700


def test_put_of_an_existing_name_replaces_it(store: ServerStore) -> None:
    moved = ServerEntry("docs", "https://docs2.example/mcp", "sse", ("a",), "headers", {"X-Key": "v2"})
    assert store.put(moved).changed is True
    result = store.load()
    assert result.entries == (WIKI, OPEN, moved)
    assert result.rejected == ()


def test_put_and_remove_keep_rejected_entries_untouched(store: ServerStore) -> None:
    edit(store, lambda servers: servers[1].update(url="https://attacker.example/"))
    garbage = doc_of(store)["servers"][1]
    store.put(ServerEntry("more", "https://more.example/"))
    store.remove("open")
    doc = doc_of(store)
    assert garbage in doc["servers"]
    result = store.load()
    assert [e.name for e in result.entries] == ["docs", "more"]
    assert reasons(result) == {"wiki": FORGED}


def test_remove_of_a_rejected_entry_removes_it(store: ServerStore) -> None:
    edit(store, lambda servers: servers[1].update(url="https://attacker.example/"))
    assert store.remove("wiki").changed is True
    result = store.load()
    assert result.entries == (DOCS, OPEN)
    assert result.rejected == ()


def test_putting_a_name_again_replaces_its_rejected_entry(store: ServerStore) -> None:
    edit(store, lambda servers: servers[1].update(url="https://attacker.example/"))
    assert store.put(WIKI).changed is True
    result = store.load()
    assert result.rejected == ()
    assert result.entries == (DOCS, OPEN, WIKI)


def test_a_servers_own_write_leaves_a_rejected_or_doubled_entry_of_its_name_as_it_is(
    store: ServerStore,
) -> None:
    edit(store, lambda servers: servers[1].update(url="https://attacker.example/"))
    before = store.path.read_bytes()
    assert store.rewrite(replace(WIKI, pins=Pins({})), built_from=WIKI) is None
    assert store.path.read_bytes() == before
    edit(store, lambda servers: servers.append(dict(servers[0])))  # "docs" twice: an old copy spliced in
    before = store.path.read_bytes()
    assert store.rewrite(replace(DOCS, pins=Pins({})), built_from=DOCS) is None
    assert store.path.read_bytes() == before


def test_remove_of_an_unknown_name_changes_nothing(store: ServerStore) -> None:
    before = store.path.read_bytes()
    assert store.remove("nope") == Saved(False)
    assert store.path.read_bytes() == before


def test_save_writes_exactly_the_given_entries_and_drops_rejected_ones(store: ServerStore) -> None:
    edit(store, lambda servers: servers.append({"name": "garbage"}))
    store.save([OPEN])
    assert store.load() == LoadResult((OPEN,), (), None, store.signature())


def test_save_refuses_two_entries_with_one_name(store: ServerStore) -> None:
    with pytest.raises(StoreError, match="two servers named 'docs'"):
        store.save([DOCS, DOCS])


# --- change detection -------------------------------------------------------------------------


def test_changed_is_true_before_the_first_load_and_false_after_it(store: ServerStore) -> None:
    assert store.changed() is True
    store.load()
    assert store.changed() is False
    assert store.changed() is False


def test_changed_notices_an_edit_a_replacement_a_deletion_and_a_creation(store: ServerStore) -> None:
    store.load()
    with store.path.open("a") as f:
        f.write(" ")
    assert store.changed() is True
    store.load()
    store.put(DOCS)
    assert store.changed() is True
    store.load()
    store.path.unlink()
    assert store.changed() is True
    assert store.load() == LoadResult()
    assert store.changed() is False
    store.put(DOCS)
    assert store.changed() is True


# --- the seams ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seam", "backend"), [(ServerStorage, ServerStore), (EntryWriter, ServerStore), (AuditTrail, AuditLog)]
)
def test_the_store_and_the_audit_log_offer_every_member_of_the_seams_they_fill(
    seam: type, backend: type
) -> None:
    members = {name for name in vars(seam) if not name.startswith("_")}
    assert members
    assert all(hasattr(backend, name) for name in members), members - set(dir(backend))
