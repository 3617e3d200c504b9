"""An enterprise grant's identity provider is sealed with the grant: it opens again, its ID token
counts among the grant's secrets, and it is never shown."""

from __future__ import annotations

import json

import pytest
from mcp.shared.auth import OAuthClientInformationFull

from playa.exceptions import ValidationError
from playa.mcp_remote.store import ENTERPRISE_GRANT, IdentityProvider, OAuthGrant

ID_TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJvd25lciJ9.c2lnbmF0dXJlLW9mLXRoZS1pZHA"


def _grant() -> OAuthGrant:
    client = OAuthClientInformationFull(
        client_id="xaa",
        client_secret="cs-abcdefghijklmnop",
        redirect_uris=None,
        grant_types=[ENTERPRISE_GRANT],
    )
    idp = IdentityProvider("https://idp.example", ID_TOKEN, "playa")
    return OAuthGrant(resource="https://mcp.example/mcp", client=client, idp=idp)


def test_an_enterprise_grant_opens_as_sealed_and_needs_no_login() -> None:
    grant = _grant()
    opened = OAuthGrant.decode(grant.encode())
    assert opened.idp == grant.idp and opened.enterprise and opened.machine
    assert ID_TOKEN in opened.secrets


def test_the_id_token_is_never_shown() -> None:
    grant = _grant()
    assert ID_TOKEN not in repr(grant) and ID_TOKEN not in repr(grant.idp)


def test_a_grant_without_an_idp_keeps_its_old_form() -> None:
    grant = OAuthGrant(resource="https://mcp.example/mcp")
    assert "idp" not in json.loads(grant.encode())
    assert OAuthGrant.decode(grant.encode()).idp is None


@pytest.mark.parametrize("idp", [None, "x", {"issuer": "https://i"}, {"issuer": 1, "id_token": "t"}])
def test_a_malformed_idp_is_refused_unquoted(idp: object) -> None:
    raw = json.loads(_grant().encode())
    raw["idp"] = idp
    with pytest.raises(ValidationError) as raised:
        OAuthGrant.decode(json.dumps(raw))
    assert ID_TOKEN not in str(raised.value)
