"""``/mcp_add`` for a machine client (``--grant client-credentials``): its secret or its private
key, asked in secret when left out, checked without ever being quoted, and sealed with the grant."""

from __future__ import annotations

import shlex

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from playa.exceptions import ValidationError
from playa.mcp_remote.commands import carries_secret, parse_add
from playa.mcp_remote.commands._asking import ask_secrets
from playa.mcp_remote.store import CLIENT_CREDENTIALS, OAuthGrant, client_key_pem, signing_algorithm
from support.chat import ScriptedUI

pytestmark = pytest.mark.anyio

URL = "https://mcp.example.com/mcp"
SECRET = "cs-0123456789abcdefghijklmnop"


def _pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture
def pem() -> str:
    return _pem(ec.generate_private_key(ec.SECP256R1()))


def _body(pem: str) -> str:
    return "".join(line for line in pem.splitlines() if not line.startswith("-----"))


def test_a_machine_client_with_a_secret_needs_no_login_and_keeps_its_secret_sealed() -> None:
    request = parse_add(f"bot {URL} --client-id svc --client-secret {SECRET} --grant client-credentials")
    entry = request.entry()
    assert entry.auth_kind == "oauth" and entry.oauth is not None
    grant = entry.oauth
    assert grant.machine and grant.client is not None
    assert grant.client.grant_types == [CLIENT_CREDENTIALS]
    assert grant.client.token_endpoint_auth_method == "client_secret_basic"
    assert SECRET in grant.secrets and SECRET not in repr(grant) and SECRET not in repr(request)
    assert carries_secret(f"bot {URL} --client-id svc --client-secret {SECRET} --grant client-credentials")


def test_a_machine_client_with_a_key_signs_with_it_and_the_key_is_a_credential_line_by_line(pem: str) -> None:
    args = f"bot {URL} --client-id svc --grant client-credentials --client-key {shlex.quote(pem)}"
    assert carries_secret(args)
    grant = parse_add(args).entry().oauth
    assert grant is not None and grant.machine and grant.client is not None
    assert grant.client.token_endpoint_auth_method == "private_key_jwt"
    assert grant.client_key == pem
    assert pem.strip() in grant.secrets
    assert all(line in grant.secrets for line in pem.splitlines() if not line.startswith("-----"))
    assert _body(pem)[:40] not in repr(grant)
    opened = OAuthGrant.decode(grant.encode())
    assert opened.client_key == pem and opened.machine


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("--grant client-credentials", "--grant client-credentials takes --client-id with either"),
        (
            "--client-id svc --grant client-credentials",
            "--grant client-credentials takes --client-id with either",
        ),
        (f"--client-id svc --client-secret {SECRET} --client-key --grant client-credentials", "either"),
        ("--client-id svc --client-key", "--client-key signs a machine client's requests"),
        ("--client-id svc --grant password", "--grant takes authorization-code or client-credentials"),
    ],
)
def test_a_machine_client_needs_its_id_and_exactly_one_credential(args: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_add(f"bot {URL} {args}")


def test_a_key_that_is_no_key_is_refused_without_being_quoted(pem: str) -> None:
    broken = pem.replace(_body(pem)[10:30], "A" * 20)
    for value in (
        broken,
        "-----BEGIN PRIVATE KEY-----sk-live-ABCDEFGHIJKLMNOP-----END PRIVATE KEY-----",
        "sk-live-XYZ",
    ):
        with pytest.raises(ValidationError) as raised:
            parse_add(
                f"bot {URL} --client-id svc --grant client-credentials --client-key {shlex.quote(value)}"
            )
        text = str(raised.value)
        assert "ABCDEFGHIJ" not in text and "XYZ" not in text and _body(pem)[:20] not in text


def test_a_weak_rsa_key_is_refused() -> None:
    weak = _pem(rsa.generate_private_key(public_exponent=65537, key_size=1024))
    with pytest.raises(ValueError, match="shorter than 2048"):
        signing_algorithm(weak)


@pytest.mark.parametrize("joiner", ["", " "])
def test_a_key_sent_on_one_line_is_the_same_key(pem: str, joiner: str) -> None:
    assert client_key_pem(joiner.join(pem.splitlines())) == pem


async def test_a_key_left_out_is_asked_in_secret_and_checked(pem: str) -> None:
    request = parse_add(f"bot {URL} --client-id svc --grant client-credentials --client-key")
    assert request.ask_client_key and not carries_secret(f"bot {URL} --client-id svc --client-key")
    ui = ScriptedUI(answers=["".join(pem.splitlines())])
    assert await ask_secrets(request, ui) is None
    ((question, secret),) = ui.asked
    assert secret and "private key" in question
    assert request.client_key == pem and not request.ask_client_key


async def test_an_answer_that_is_no_key_saves_nothing_and_is_not_quoted() -> None:
    request = parse_add(f"bot {URL} --client-id svc --grant client-credentials --client-key")
    ui = ScriptedUI(answers=["my-password-is-hunter2-and-more"])
    with pytest.raises(ValidationError) as raised:
        await ask_secrets(request, ui)
    assert "hunter2" not in str(raised.value)
    assert request.client_key is None
    assert await ask_secrets(
        parse_add(f"bot {URL} --client-id svc --grant client-credentials --client-key"), ScriptedUI()
    ) == ("No answer came, so nothing was saved.")
