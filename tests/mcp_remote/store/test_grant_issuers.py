"""A grant keeps its client's registrations per issuer (SEP-2352): the one in use, and the ones
made with other authorization servers, each bound to its issuer, sealed, and never shown."""

from __future__ import annotations

import json

import pytest
from mcp.shared.auth import OAuthClientInformationFull

from playa.exceptions import ValidationError
from playa.mcp_remote.store import OAuthGrant

RESOURCE = "https://mcp.example.com/mcp"


def _client(name: str, issuer: str | None) -> OAuthClientInformationFull:
    return OAuthClientInformationFull(
        client_id=f"id-{name}",
        client_secret=f"secret-{name}-0123456789abcdef",
        redirect_uris=["http://127.0.0.1/oauth/callback"],
        issuer=issuer,
    )


def test_a_registration_with_another_issuer_keeps_the_first_for_its_own_issuer() -> None:
    first, second = _client("a", "https://as-one.example"), _client("b", "https://as-two.example")
    grant = OAuthGrant(RESOURCE).with_client(first).with_client(second)
    assert grant.client is second and grant.issuer == "https://as-two.example"
    assert grant.client_for("https://as-one.example") is first
    assert grant.client_for("https://as-one.example/") is first  # a root issuer with its slash
    assert grant.client_for("https://as-two.example") is second
    assert grant.client_for("https://as-three.example") is None
    # Moving back: the first is in use again, the second kept for its issuer; never both copies.
    back = grant.with_client(first)
    assert back.client is first and back.elsewhere == (second,)


def test_registrations_with_other_issuers_are_credentials_sealed_and_never_shown() -> None:
    first, second = _client("a", "https://as-one.example"), _client("b", "https://as-two.example")
    grant = OAuthGrant(RESOURCE).with_client(first).with_client(second)
    assert {first.client_secret, second.client_secret} <= grant.secrets
    assert "secret-a" not in repr(grant) and "id-a" not in repr(grant)
    opened = OAuthGrant.decode(grant.encode())
    assert opened.client_for("https://as-one.example") == first
    assert opened.client == second


def test_a_client_bound_to_no_issuer_is_replaced_not_kept() -> None:
    grant = (
        OAuthGrant(RESOURCE).with_client(_client("a", None)).with_client(_client("b", "https://as.example"))
    )
    assert grant.elsewhere == ()


def test_a_sealed_grant_with_too_many_or_malformed_registrations_does_not_open() -> None:
    grant = json.loads(OAuthGrant(RESOURCE).with_client(_client("a", "https://as.example")).encode())
    for elsewhere in ([{"client_id": 5}], [{}] * 9, "not a list"):
        with pytest.raises(ValidationError) as raised:
            OAuthGrant.decode(json.dumps({**grant, "elsewhere": elsewhere}))
        assert "secret-a" not in str(raised.value)
