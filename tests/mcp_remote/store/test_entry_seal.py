"""An entry's seal: every tamper, copy, swap and forgery is refused, entry by entry, and no file
the store did not write yields an entry."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playa.mcp_remote.store import LoadResult, Rejected, Sealer, ServerEntry, ServerStore
from support.store import (
    ALL,
    CANARY,
    DOCS,
    FORGED,
    NEW,
    OPEN,
    SCOPE,
    WIKI,
    doc_of,
    edit,
    new_store,
    reasons,
    warning_of,
    write_doc,
)

# --- tampering ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("url", "https://attacker.example/mcp"),
        ("name", "docs2"),
        ("transport", "sse"),
        ("tools", ["search"]),
        ("tools", []),
        ("auth", {"kind": "headers", "headers": ["X-Api-Key"]}),
        ("auth", {"kind": "headers", "headers": ["Authorization"]}),
    ],
)
def test_an_edited_visible_field_breaks_the_seal_and_leaves_the_others(
    store: ServerStore, field: str, value: object
) -> None:
    def change(servers: list[dict[str, Any]]) -> None:
        servers[0][field] = value

    edit(store, change)
    rejected = only_the_first_rejected(store)
    assert rejected.reason == FORGED


def test_changing_the_tool_list_of_an_entry_with_an_allow_list_breaks_the_seal(store: ServerStore) -> None:
    edit(store, lambda servers: servers[1]["tools"].append("delete"))
    assert store.load().entries == (DOCS, OPEN)
    assert reasons(store.load()) == {"wiki": FORGED}


def test_an_entry_copied_from_another_chat_does_not_open(tmp_path: Path) -> None:
    theirs = new_store(tmp_path / "a", scope="telegram:999")
    theirs.save(ALL)
    ours = new_store(tmp_path / "b", scope="telegram:123")
    ours.path.parent.mkdir(parents=True)
    ours.path.write_bytes(theirs.path.read_bytes())
    result = ours.load()
    assert result.entries == ()
    assert [r.reason for r in result.rejected] == [FORGED] * 3
    assert theirs.load().entries == ALL


@pytest.mark.parametrize("part", ["nonce", "ct"])
def test_a_nonce_or_ciphertext_swapped_between_entries_breaks_both(store: ServerStore, part: str) -> None:
    def change(servers: list[dict[str, Any]]) -> None:
        a, b = servers[0]["seal"], servers[1]["seal"]
        a[part], b[part] = b[part], a[part]

    edit(store, change)
    result = store.load()
    assert result.entries == (OPEN,)
    assert reasons(result) == {"docs": FORGED, "wiki": FORGED}


def test_a_whole_seal_moved_to_another_entry_does_not_open(store: ServerStore) -> None:
    def change(servers: list[dict[str, Any]]) -> None:
        servers[2]["seal"] = servers[0]["seal"]

    edit(store, change)
    assert store.load().entries == (DOCS, WIKI)


def test_a_flipped_bit_in_the_ciphertext_breaks_the_seal(store: ServerStore) -> None:
    def change(servers: list[dict[str, Any]]) -> None:
        ct = servers[0]["seal"]["ct"]
        servers[0]["seal"]["ct"] = ct[:10] + ("A" if ct[10] != "A" else "B") + ct[11:]

    edit(store, change)
    assert reasons(store.load()) == {"docs": FORGED}


def test_truncated_or_non_canonical_base64_is_rejected_as_malformed(store: ServerStore) -> None:
    def change(servers: list[dict[str, Any]]) -> None:
        servers[0]["seal"]["ct"] = servers[0]["seal"]["ct"][:-1]
        servers[1]["seal"]["nonce"] = " " + servers[1]["seal"]["nonce"]

    edit(store, change)
    result = store.load()
    assert result.entries == (OPEN,)
    assert "not valid base64" in reasons(result)["docs"]
    assert "not valid base64" in reasons(result)["wiki"]


def test_an_entry_with_an_unknown_seal_version_is_rejected_as_such(store: ServerStore) -> None:
    edit(store, lambda servers: servers[0]["seal"].update(v=2, future="x"))
    result = store.load()
    assert result.entries == (WIKI, OPEN)
    assert reasons(result)["docs"].startswith("unknown version")


def test_a_file_of_an_unknown_version_gives_no_servers_a_warning_and_is_set_aside_not_overwritten(
    store: ServerStore,
) -> None:
    doc = doc_of(store)
    doc["version"] = 2
    write_doc(store, doc)
    before = store.path.read_bytes()
    assert "unknown format version" in warning_of(store)
    saved = store.put(NEW)
    assert saved.notes == (
        ".volcanic/mcp/servers.json has unknown format version; this Playa reads version 1; "
        "I moved it aside to .volcanic/mcp/servers.json.unreadable",
    )
    assert (store.path.parent / "servers.json.unreadable").read_bytes() == before
    assert store.load().entries == (NEW,)


def test_two_verified_entries_with_one_name_are_both_rejected(store: ServerStore) -> None:
    edit(store, lambda servers: servers.append(copy.deepcopy(servers[0])))
    result = store.load()
    assert result.entries == (WIKI, OPEN)
    assert [(r.index, r.name) for r in result.rejected] == [(0, "docs"), (3, "docs")]
    assert all(r.reason.startswith("duplicate name") for r in result.rejected)


def test_a_forged_entry_reusing_a_name_does_not_take_the_real_one_down(store: ServerStore) -> None:
    def change(servers: list[dict[str, Any]]) -> None:
        forged = copy.deepcopy(servers[0])
        forged["url"] = "https://attacker.example/"
        servers.insert(0, forged)

    edit(store, change)
    result = store.load()
    assert result.entries == ALL
    assert [(r.index, r.name, r.reason) for r in result.rejected] == [(0, "docs", FORGED)]


def test_entries_sealed_with_another_key_are_rejected_as_such(tmp_path: Path, store: ServerStore) -> None:
    result = new_store(tmp_path, sealer=Sealer(b"another secret!!")).load()
    assert result.entries == ()
    assert len(result.rejected) == 3
    assert all(r.reason.startswith("sealed with another key") for r in result.rejected)


def only_the_first_rejected(store: ServerStore) -> Rejected:
    """What a load says of the first entry when it alone is refused (the others still load)."""
    result = store.load()
    assert result.entries == (WIKI, OPEN)
    assert [rejected.index for rejected in result.rejected] == [0]
    return result.rejected[0]


@pytest.mark.parametrize(
    ("raw", "name", "reason"),
    [
        ("not an object", None, "malformed: entry is not an object"),
        ({"name": 5}, None, "malformed: missing field"),
        ({"name": "x"}, "x", "malformed: missing field"),
        ("EXTRA", "docs", "malformed: unexpected field"),
        ("NO_SEAL", "docs", "malformed: missing field(s) seal"),
        ("BAD_AUTH", "docs", "malformed: auth must be an object"),
        ("BAD_TOOLS", "docs", "malformed: tools must be"),
    ],
)
def test_malformed_entries_are_rejected_with_a_reason_and_the_others_still_load(
    store: ServerStore, raw: object, name: str | None, reason: str
) -> None:
    def change(servers: list[dict[str, Any]]) -> None:
        entry: object = raw
        if raw == "EXTRA":
            entry = {**servers[0], "comment": "hi"}
        elif raw == "NO_SEAL":
            entry = {k: v for k, v in servers[0].items() if k != "seal"}
        elif raw == "BAD_AUTH":
            entry = {**servers[0], "auth": "bearer"}
        elif raw == "BAD_TOOLS":
            entry = {**servers[0], "tools": [1]}
        servers[0] = entry  # type: ignore[call-overload]

    edit(store, change)
    rejected = only_the_first_rejected(store)
    assert rejected.name == name
    assert rejected.reason.startswith(reason)


def test_an_entry_that_repeats_a_key_is_rejected(store: ServerStore) -> None:
    text = store.path.read_text()
    # The JSON text names the url twice; a lenient reader would keep the second.
    text = text.replace(
        '"url": "https://docs.example/mcp"', '"url": "https://docs.example/mcp", "url": "x"', 1
    )
    store.path.write_text(text)
    result = store.load()
    assert result.entries == (WIKI, OPEN)
    assert reasons(result) == {"docs": "malformed: entry repeats a field"}


# --- properties -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _load_bytes(data: bytes, scope: str = SCOPE) -> LoadResult:
    with tempfile.TemporaryDirectory() as workspace:
        s = new_store(Path(workspace), scope)
        s.path.parent.mkdir(parents=True)
        s.path.write_bytes(data)
        return s.load()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_the_loader_never_raises_on_arbitrary_bytes_and_finds_nothing(data: bytes) -> None:
    result = _load_bytes(data)
    assert result.entries == ()


@settings(max_examples=200, deadline=None)
@given(json_values, st.booleans())
def test_the_loader_never_raises_on_arbitrary_json_and_finds_nothing(value: object, wrap: bool) -> None:
    doc = {"version": 1, "servers": value if isinstance(value, list) else [value]} if wrap else value
    result = _load_bytes(json.dumps(doc).encode())
    assert result.entries == ()
    if wrap:
        assert result.warning is None
        assert len(result.rejected) == len(doc["servers"])  # type: ignore[index]


def _sealed_servers(scope: str, entries: tuple[ServerEntry, ...]) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as workspace:
        s = new_store(Path(workspace), scope)
        s.save(entries)
        return doc_of(s)["servers"]  # type: ignore[no-any-return]


OURS = _sealed_servers(SCOPE, ALL)
# Another chat's entries, same key: valid seals in every respect except the scope.
THEIRS = _sealed_servers("telegram:999", (*ALL, ServerEntry("evil", "https://evil.example/")))
FIELDS = ["name", "url", "transport", "tools", "auth", "seal"]
POOL: list[Any] = [
    e[f] for e in OURS + THEIRS for f in FIELDS
]  # values an attacker can splice in: every field of every sealed entry

mutation = st.one_of(
    st.tuples(
        st.just("set"), st.integers(0, 10), st.sampled_from(FIELDS), st.sampled_from(POOL) | json_values
    ),
    st.tuples(st.just("delete"), st.integers(0, 10), st.sampled_from(FIELDS)),
    st.tuples(
        st.just("seal"), st.integers(0, 10), st.sampled_from(["v", "kid", "nonce", "ct"]), st.integers(0, 10)
    ),
    st.tuples(st.just("insert"), st.integers(0, 10), st.sampled_from(OURS + THEIRS)),
    st.tuples(st.just("drop"), st.integers(0, 10)),
    st.tuples(st.just("swap"), st.integers(0, 10), st.integers(0, 10)),
    st.tuples(st.just("flip"), st.integers(0, 10), st.sampled_from(["nonce", "ct"]), st.integers(0, 40)),
)


def _apply(servers: list[Any], op: tuple[Any, ...]) -> None:
    if not servers and op[0] != "insert":
        return
    i = op[1] % max(len(servers), 1)
    target = servers[i] if servers else None
    if op[0] == "set" and isinstance(target, dict):
        target[op[2]] = copy.deepcopy(op[3])
    elif op[0] == "delete" and isinstance(target, dict):
        target.pop(op[2], None)
    elif op[0] == "seal" and isinstance(target, dict) and isinstance(target.get("seal"), dict):
        donor = (OURS + THEIRS)[op[3] % len(OURS + THEIRS)]["seal"]
        target["seal"][op[2]] = donor[op[2]]
    elif op[0] == "insert":
        servers.insert(i, copy.deepcopy(op[2]))
    elif op[0] == "drop":
        servers.pop(i)
    elif op[0] == "swap":
        j = op[2] % len(servers)
        servers[i], servers[j] = servers[j], servers[i]
    elif op[0] == "flip" and isinstance(target, dict) and isinstance(target.get("seal"), dict):
        text = target["seal"].get(op[2])
        if isinstance(text, str) and text:
            k = op[3] % len(text)
            target["seal"][op[2]] = text[:k] + ("A" if text[k] != "A" else "B") + text[k + 1 :]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutation, min_size=1, max_size=6))
def test_a_mutated_file_never_yields_an_entry_the_store_did_not_write(ops: list[tuple[Any, ...]]) -> None:
    servers = copy.deepcopy(OURS)
    for op in ops:
        _apply(servers, op)
    result = _load_bytes(json.dumps({"version": 1, "servers": servers}).encode())
    assert result.warning is None
    for entry in result.entries:
        assert entry in ALL
    assert len(result.entries) + len(result.rejected) == len(servers)
    assert all(CANARY not in r.reason for r in result.rejected)
