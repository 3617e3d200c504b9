"""OAuth grants sealed in the server file: round trip, binding to the URL, nothing in clear."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from playa.exceptions import ValidationError
from playa.mcp_remote.store import OAuthGrant, Sealer, ServerEntry, ServerStore, resource_of

SCOPE = "console:default"
SEALER = Sealer(b"k" * 32)
ACCESS = "access-canary-0b3f9d7e1c2a4f6e8d0b"
REFRESH = "refresh-canary-7a1c3e5f9b2d4a6c8e0f"
CLIENT_SECRET = "client-secret-canary-4e6a8c0b2d4f6a8c"
URL = "https://mcp.example/mcp"


def _grant(url: str = URL) -> OAuthGrant:
    return OAuthGrant(
        resource=resource_of(url),
        issuer="https://auth.example/",
        client=OAuthClientInformationFull(
            client_id="playa-client",
            client_secret=CLIENT_SECRET,
            token_endpoint_auth_method="client_secret_basic",
        ),
        tokens=OAuthToken(access_token=ACCESS, refresh_token=REFRESH, expires_in=3600, scope="mcp"),
        expires_at=1_900_000_000.0,
    )


def _entry(grant: OAuthGrant | None = None) -> ServerEntry:
    return ServerEntry("linear", URL, auth_kind="oauth", oauth=grant if grant is not None else _grant())


def test_a_grant_is_sealed_with_the_entry_and_loads_back_whole(tmp_path: Path) -> None:
    store = ServerStore(tmp_path, SCOPE, SEALER)
    store.put(_entry())
    loaded = ServerStore(tmp_path, SCOPE, SEALER).load()
    assert loaded.rejected == ()
    (entry,) = loaded.entries
    assert entry.auth_kind == "oauth"
    assert entry.oauth is not None
    assert entry.oauth.tokens == _grant().tokens
    assert entry.oauth.client == _grant().client
    assert entry.oauth.issuer == "https://auth.example/"
    assert entry.oauth.expires_at == 1_900_000_000.0
    assert entry.secrets == {ACCESS, REFRESH, CLIENT_SECRET}


def test_no_token_or_client_secret_is_in_the_file_in_clear(tmp_path: Path) -> None:
    store = ServerStore(tmp_path, SCOPE, SEALER)
    store.put(_entry())
    text = store.path.read_text()
    for value in (ACCESS, REFRESH, CLIENT_SECRET, "playa-client"):
        assert value not in text
    (raw,) = json.loads(text)["servers"]
    assert raw["auth"] == {"kind": "oauth", "headers": []}


def test_a_grant_for_another_url_is_refused() -> None:
    with pytest.raises(ValidationError, match="another URL"):
        ServerEntry("linear", "https://evil.example/mcp", auth_kind="oauth", oauth=_grant())


def test_an_oauth_entry_cannot_carry_headers_nor_another_kind_a_grant() -> None:
    with pytest.raises(ValidationError):
        ServerEntry("linear", URL, auth_kind="oauth", headers={"X-Key": "k" * 20})
    with pytest.raises(ValidationError):
        ServerEntry("linear", URL, auth_kind="none", oauth=_grant())


def test_an_oauth_entry_redirected_in_the_file_does_not_open(tmp_path: Path) -> None:
    store = ServerStore(tmp_path, SCOPE, SEALER)
    store.put(_entry())
    doc = json.loads(store.path.read_text())
    doc["servers"][0]["url"] = "https://evil.example/mcp"
    store.path.write_text(json.dumps(doc))
    loaded = store.load()
    assert loaded.entries == ()
    assert "does not verify" in loaded.rejected[0].reason


def test_an_oauth_entry_copied_to_another_chat_does_not_open(tmp_path: Path) -> None:
    ServerStore(tmp_path, SCOPE, SEALER).put(_entry())
    loaded = ServerStore(tmp_path, "telegram:1", SEALER).load()
    assert loaded.entries == ()


def test_a_refreshed_grant_is_the_same_server(tmp_path: Path) -> None:
    # The chat must not reconnect a server because its token was refreshed.
    refreshed = _grant().with_tokens(OAuthToken(access_token="a" * 30), now=0.0)
    assert _entry() == _entry(refreshed)
    assert replace(_entry(), oauth=None) == _entry()


def test_an_entry_without_a_grant_yet_is_stored_and_loads(tmp_path: Path) -> None:
    store = ServerStore(tmp_path, SCOPE, SEALER)
    store.put(ServerEntry("linear", URL, auth_kind="oauth"))
    (entry,) = store.load().entries
    assert entry.oauth is None
    assert entry.secrets == frozenset()


def test_a_grant_that_cannot_be_read_is_refused_without_quoting_it() -> None:
    with pytest.raises(ValidationError) as raised:
        OAuthGrant.decode(
            json.dumps(
                {
                    "v": 1,
                    "resource": URL,
                    "issuer": None,
                    "client": None,
                    "tokens": {"access_token": 5, "refresh_token": REFRESH},
                    "expires_at": None,
                }
            )
        )
    assert REFRESH not in str(raised.value)
    assert raised.value.__cause__ is None


def test_a_grant_round_trips_through_its_encoding() -> None:
    grant = _grant()
    again = OAuthGrant.decode(grant.encode())
    assert (again.resource, again.issuer, again.client, again.tokens, again.expires_at) == (
        grant.resource,
        grant.issuer,
        grant.client,
        grant.tokens,
        grant.expires_at,
    )
    assert ACCESS not in repr(grant)
