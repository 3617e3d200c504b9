"""A server entry's rules, and its secrets: never shown, and a URL's credentials sealed, not shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from playa.exceptions import ValidationError
from playa.mcp_remote.store import ServerEntry, ServerStore
from support.store import (
    CANARY,
    DOCS,
    FORGED,
    SCOPE,
    SEALER,
    WIKI,
    doc_of,
    edit,
    new_store,
    reasons,
    write_doc,
)

# --- secrets never shown ------------------------------------------------------------------------


def test_header_values_never_appear_in_reprs_or_reasons(store: ServerStore) -> None:
    edit(store, lambda servers: servers[0].update(url="https://attacker.example/"))
    result = store.load()
    assert CANARY not in repr(result)
    assert CANARY not in str(result)
    assert CANARY not in repr(WIKI)
    assert "X-Api-Key" in repr(WIKI)
    assert all(CANARY not in r.reason for r in result.rejected)
    assert CANARY not in repr(store)


def test_a_bad_header_value_is_refused_without_quoting_it() -> None:
    with pytest.raises(ValidationError) as info:
        ServerEntry("x", "https://x.example/", auth_kind="headers", headers={"X-Key": f"{CANARY}\r\nHost: y"})
    assert info.value.field == "headers"
    assert CANARY not in str(info.value)


# --- entry validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "Docs"}, "name"),
        ({"name": "a" * 33}, "name"),
        ({"name": "a_b"}, "name"),
        ({"name": "9a"}, "name"),
        ({"url": "ftp://x.example/"}, "url"),
        ({"url": "https://user:pw@x.example/"}, "url"),
        ({"url": "https:///path"}, "url"),
        ({"url": "https://x.example/a b"}, "url"),
        ({"url": "https://x.example:99999/"}, "url"),
        ({"transport": "stdio"}, "transport"),
        ({"tools": ("a", "a")}, "tools"),
        ({"tools": ("",)}, "tools"),
        ({"auth_kind": "basic"}, "auth"),
        ({"auth_kind": "oauth", "headers": {"X-Key": "v"}}, "auth"),
        ({"auth_kind": "none", "headers": {"X-Key": "v"}}, "auth"),
        ({"auth_kind": "bearer"}, "auth"),
        ({"auth_kind": "headers", "headers": {"Bad Name": "v"}}, "headers"),
        ({"auth_kind": "headers", "headers": {"X-Key": "v", "x-key": "w"}}, "headers"),
    ],
)
def test_an_entry_that_breaks_a_rule_is_refused_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    arguments: dict[str, Any] = {"name": "ok", "url": "https://ok.example/", **kwargs}
    with pytest.raises(ValidationError) as info:
        ServerEntry(**arguments)
    assert info.value.field == field


def test_an_entry_keeps_a_private_copy_of_its_headers() -> None:
    headers = {"X-Key": "v"}
    entry = ServerEntry("x", "https://x.example/", auth_kind="headers", headers=headers)
    headers["X-Key"] = "changed"
    assert entry.headers == {"X-Key": "v"}
    with pytest.raises(TypeError):
        entry.headers["X-Key"] = "w"  # type: ignore[index]


def test_entries_share_one_empty_read_only_map_and_keep_their_own_when_not_empty() -> None:
    # A host holds every open chat's entries, and most of their maps are empty.
    plain = ServerEntry("x", "https://x.example/")
    other = ServerEntry("y", "https://y.example/")
    empties = [plain.headers, plain.policy.tools, plain.policy.read_only_tools, other.headers]
    assert all(empty == {} and empty is plain.headers for empty in empties)
    with pytest.raises(TypeError):
        plain.headers["X-Key"] = "w"  # type: ignore[index]
    keyed = ServerEntry("z", "https://z.example/", auth_kind="headers", headers={"X-Key": "v"})
    assert keyed.headers == {"X-Key": "v"} and plain.headers == {}


def test_an_entry_sends_its_headers_in_the_order_the_file_keeps_them(store: ServerStore) -> None:
    # An entry as the owner's command wrote it and as the file gives it back send the same request.
    headers = {"X-Api-Key": "k" * 20, "Authorization": "Bearer " + "t" * 20}
    entry = ServerEntry("docs", "https://docs.example/mcp", auth_kind="headers", headers=headers)
    assert entry.header_names == ("Authorization", "X-Api-Key")
    store.put(entry)
    (loaded,) = [e for e in store.load().entries if e.name == "docs"]
    assert list(loaded.headers.items()) == list(entry.headers.items())


def test_an_entry_is_hashable_and_compares_by_value() -> None:
    again = ServerEntry(
        "docs", "https://docs.example/mcp", "auto", None, "bearer", {"Authorization": f"Bearer {CANARY}"}
    )
    assert again == DOCS
    assert hash(again) == hash(DOCS)
    assert {again, DOCS} == {DOCS}


# --- credentials in the URL -------------------------------------------------------------------

URL_KEY = "Zq7Xw3KpL9mN2bV4cX8dR1"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://h.example/mcp?api_key={URL_KEY}", "https://h.example/mcp?api_key=[redacted]"),
        ("https://h.example/mcp?TOKEN=abcdefgh&x=1", "https://h.example/mcp?TOKEN=[redacted]&x=1"),
        (f"https://h.example/v1/{URL_KEY}/mcp", "https://h.example/v1/[redacted]/mcp"),
        (f"https://{URL_KEY}@h.example/mcp", "https://[redacted]@h.example/mcp"),
        ("https://user:pass12345@h.example:8443/mcp", "https://[redacted]@h.example:8443/mcp"),
        (f"https://h.example/mcp?{URL_KEY}", "https://h.example/mcp?[redacted]"),
    ],
)
def test_a_url_secret_is_sealed_and_the_file_shows_the_url_masked(
    tmp_path: Path, url: str, shown: str
) -> None:
    entry = ServerEntry("keyed", url)
    assert entry.shown_url == shown
    s = new_store(tmp_path)
    s.save([entry])
    text = s.path.read_text()
    assert doc_of(s)["servers"][0]["url"] == shown
    for secret in entry.secrets:
        assert secret not in text
    assert entry.secrets and all(secret not in repr(entry) for secret in entry.secrets)
    loaded = s.load().entries
    assert loaded == (entry,) and loaded[0].url == url


def test_the_owners_secret_url_masks_every_segment_and_value_and_is_sealed(tmp_path: Path) -> None:
    entry = ServerEntry("marked", "https://h.example/s/abcdefghij/mcp?team=42", secret_url=True)
    assert entry.shown_url == "https://h.example/[redacted]/[redacted]/[redacted]?team=[redacted]"
    assert entry.secrets == {"abcdefghij"}  # the short parts are masked, not redacted everywhere
    s = new_store(tmp_path)
    s.save([entry])
    assert s.load().entries == (entry,)
    assert s.load().entries[0].secret_url


def test_a_sealed_url_that_does_not_match_the_shown_one_is_rejected(tmp_path: Path) -> None:
    s = new_store(tmp_path)
    s.save([ServerEntry("keyed", f"https://h.example/mcp?api_key={URL_KEY}")])
    doc = doc_of(s)
    # Shown URL and seal agree, but the seal was made (by the key holder) for another real URL:
    # only possible for a bug or a stolen key, and still refused.
    raw = doc["servers"][0]
    context = {
        "scope": SCOPE,
        "name": "keyed",
        "url": raw["url"],
        "transport": "auto",
        "tools": None,
        "auth": {"kind": "none", "headers": []},
    }
    raw["seal"] = dict(SEALER.seal(context, {":url": "https://evil.example/mcp"}))
    write_doc(s, doc)
    assert reasons(s.load()) == {"keyed": "seal does not verify: the sealed URL does not match the shown one"}


def test_editing_the_masked_url_breaks_the_seal(tmp_path: Path) -> None:
    s = new_store(tmp_path)
    s.save([ServerEntry("keyed", f"https://h.example/mcp?api_key={URL_KEY}")])
    edit(s, lambda servers: servers[0].update(url="https://evil.example/mcp?api_key=[redacted]"))
    assert reasons(s.load()) == {"keyed": FORGED}


def test_an_entry_from_before_urls_were_sealed_keeps_working_and_is_shown_masked(tmp_path: Path) -> None:
    url = f"https://h.example/mcp?api_key={URL_KEY}"
    context = {
        "scope": SCOPE,
        "name": "old",
        "url": url,
        "transport": "auto",
        "tools": None,
        "auth": {"kind": "none", "headers": []},
    }
    raw = {**{k: v for k, v in context.items() if k != "scope"}, "seal": dict(SEALER.seal(context, {}))}
    s = new_store(tmp_path)
    s.path.parent.mkdir(parents=True)
    write_doc(s, {"version": 1, "servers": [raw]})
    (entry,) = s.load().entries
    assert entry.url == url
    assert entry.shown_url == "https://h.example/mcp?api_key=[redacted]"
    assert URL_KEY in entry.secrets
