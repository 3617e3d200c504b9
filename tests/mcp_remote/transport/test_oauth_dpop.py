"""DPoP (RFC 9449) as Playa's auth provider speaks it: proofs that verify, nonces a hostile server
cannot abuse, a bound token's type read for the grant, and a key that is a credential.

The whole flow runs against the conformance suite's DPoP servers (``auth/dpop``,
``auth/dpop-nonce`` in tests/conformance); these tests pin each piece and each attack."""

from __future__ import annotations

import base64
import hashlib
import json

import httpx2
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from playa.mcp_remote.store import OAuthGrant
from playa.mcp_remote.transport._dpop import DPoPKey, DPoPProofs, nonce_of, proof_target

pytestmark = pytest.mark.anyio


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _verified(proof: str) -> tuple[dict[str, object], dict[str, object]]:
    """The proof's header and claims, once its signature verifies with the key its header carries."""
    header_b64, claims_b64, signature_b64 = proof.split(".")
    header = json.loads(_unb64(header_b64))
    jwk = header["jwk"]
    public = ec.EllipticCurvePublicNumbers(
        int.from_bytes(_unb64(jwk["x"]), "big"), int.from_bytes(_unb64(jwk["y"]), "big"), ec.SECP256R1()
    ).public_key()
    raw = _unb64(signature_b64)
    signature = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(signature, f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
    return header, json.loads(_unb64(claims_b64))


def test_a_proof_verifies_with_its_public_key_and_names_the_request_and_the_token() -> None:
    key = DPoPKey.generate(clock=lambda: 1_800_000_000.0)
    proof = key.proof(
        "post", "https://mcp.example.com/mcp?session=1#frag", access_token="tok-abc", nonce="n-1"
    )
    header, claims = _verified(proof)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert set(header["jwk"]) == {"kty", "crv", "x", "y"}  # the public key only: no "d"
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://mcp.example.com/mcp"  # no query, no fragment (RFC 9449 4.2)
    assert claims["iat"] == 1_800_000_000
    assert claims["nonce"] == "n-1"
    expected_ath = base64.urlsafe_b64encode(hashlib.sha256(b"tok-abc").digest()).rstrip(b"=").decode()
    assert claims["ath"] == expected_ath


def test_every_proof_is_fresh_and_the_key_survives_its_sealed_form() -> None:
    key = DPoPKey.generate()
    jtis = {_verified(key.proof("GET", "https://a.example/mcp"))[1]["jti"] for _ in range(20)}
    assert len(jtis) == 20
    again = DPoPKey.from_secret(key.secret)
    assert again.jwk == key.jwk and again.thumbprint == key.thumbprint
    assert key.secret not in repr(key) and key.secret not in repr(again)


def test_a_key_that_is_no_key_is_refused_without_quoting_it() -> None:
    with pytest.raises(ValueError, match="not a DPoP key") as raised:
        DPoPKey.from_secret("not-a-key-at-all-but-secret-looking-XYZ")
    assert "secret-looking" not in str(raised.value)


@pytest.mark.parametrize(
    "value",
    [None, "", "bad\r\nSet-Cookie: x=1", "with space", "x" * 513, "caf\u00e9"],
)
def test_a_hostile_nonce_is_never_put_into_a_proof(value: str | None) -> None:
    assert nonce_of(value) is None


def test_proof_target_keeps_the_port_and_path() -> None:
    assert proof_target("http://127.0.0.1:8080/a/b?x=1") == "http://127.0.0.1:8080/a/b"


async def test_a_use_dpop_nonce_answer_is_retried_with_its_nonce_and_others_are_not() -> None:
    proofs = DPoPProofs(None)
    proofs.ensure_key()
    token_request = httpx2.Request(
        "POST", "https://as.example/token", data={"grant_type": "client_credentials"}
    )
    proofs.prove(token_request)
    challenge = httpx2.Response(
        400, json={"error": "use_dpop_nonce"}, headers={"DPoP-Nonce": "as-nonce"}, request=token_request
    )
    assert await proofs.nonce_asked(token_request, challenge)
    proofs.prove(token_request)
    assert _verified(token_request.headers["DPoP"])[1]["nonce"] == "as-nonce"

    # Another origin has its own nonce: the authorization server's is not sent to the resource.
    resource = httpx2.Request("POST", "https://mcp.example/mcp", headers={"Authorization": "DPoP tok-1"})
    proofs.prove(resource)
    assert "nonce" not in _verified(resource.headers["DPoP"])[1]
    refused = httpx2.Response(
        401,
        headers={"WWW-Authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": "rs-nonce"},
        request=resource,
    )
    assert await proofs.nonce_asked(resource, refused)
    proofs.prove(resource)
    claims = _verified(resource.headers["DPoP"])[1]
    assert claims["nonce"] == "rs-nonce" and "ath" in claims

    # A plain refusal, or a nonce that is no nonce, asks for no retry.
    plain = httpx2.Response(
        400, json={"error": "invalid_grant"}, headers={"DPoP-Nonce": "x"}, request=token_request
    )
    assert not await proofs.nonce_asked(token_request, plain)
    hostile = httpx2.Response(
        400, json={"error": "use_dpop_nonce"}, headers={"DPoP-Nonce": "a b"}, request=token_request
    )
    assert not await proofs.nonce_asked(token_request, hostile)


async def test_a_bound_tokens_type_is_read_for_the_grant_and_a_bearer_token_stays_bearer() -> None:
    proofs = DPoPProofs(None)
    request = httpx2.Request("POST", "https://as.example/token")
    bound = httpx2.Response(200, json={"access_token": "at-1", "token_type": "DPoP"}, request=request)
    # No key yet: a token the host did not ask to bind is not taken as bound.
    assert (await proofs.token_response(bound))[1] is False
    proofs.ensure_key()
    response, is_bound = await proofs.token_response(bound)
    assert is_bound and json.loads(await response.aread())["token_type"] == "Bearer"
    bearer = httpx2.Response(200, json={"access_token": "at-2", "token_type": "Bearer"}, request=request)
    assert (await proofs.token_response(bearer))[1] is False


async def test_dpop_is_used_only_when_both_servers_take_it() -> None:
    proofs = DPoPProofs(None)
    metadata = httpx2.Request("GET", "https://as.example/.well-known/oauth-authorization-server")
    offer = {"issuer": "https://as.example", "token_endpoint": "https://as.example/token"}
    await proofs.saw(
        metadata,
        httpx2.Response(
            200, json={**offer, "dpop_signing_alg_values_supported": ["ES256"]}, request=metadata
        ),
        resource=False,
    )
    assert not proofs.wanted("https://as.example")  # the resource has said nothing of DPoP yet
    mcp = httpx2.Request("POST", "https://mcp.example/mcp")
    await proofs.saw(
        mcp, httpx2.Response(401, headers={"WWW-Authenticate": "Bearer"}, request=mcp), resource=True
    )
    assert not proofs.wanted("https://as.example")
    await proofs.saw(
        mcp,
        httpx2.Response(401, headers={"WWW-Authenticate": 'DPoP resource_metadata="x"'}, request=mcp),
        resource=True,
    )
    assert proofs.wanted("https://as.example")
    assert not proofs.wanted("https://other-as.example")


def test_the_grant_seals_the_dpop_key_as_a_credential_and_never_shows_it() -> None:
    key = DPoPKey.generate()
    grant = OAuthGrant(resource="https://mcp.example/mcp", dpop_key=key.secret, dpop_bound=True)
    assert key.secret in grant.secrets
    assert key.secret not in repr(grant)
    opened = OAuthGrant.decode(grant.encode())
    assert opened.dpop_key == key.secret and opened.dpop_bound


def test_a_grant_sealed_before_dpop_still_opens() -> None:
    v1 = json.dumps(
        {
            "v": 1,
            "resource": "https://mcp.example/mcp",
            "issuer": None,
            "client": None,
            "tokens": None,
            "expires_at": None,
            "metadata": None,
        }
    )
    grant = OAuthGrant.decode(v1)
    assert grant.dpop_key is None and not grant.dpop_bound and grant.client_key is None
