"""``/mcp_add … --grant enterprise``: its options parse into a confidential client with the owner's
IdP, a message with the ID token in it is one to delete, and an ID token asked in secret must be
a JWT, never quoted back."""

from __future__ import annotations

import pytest

from playa.exceptions import ValidationError
from playa.mcp_remote.commands import carries_secret, parse_add
from playa.mcp_remote.commands._asking import ask_secrets
from playa.mcp_remote.store import ENTERPRISE_GRANT
from support.chat import ScriptedUI

pytestmark = pytest.mark.anyio

ID_TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJvd25lciJ9.c2lnbmF0dXJlLW9mLXRoZS1pZHA"
BASE = "corp https://mcp.example/mcp --client-id xaa --client-secret cs-abcdefghijklmnop --grant enterprise --idp https://idp.example"


def test_an_enterprise_add_makes_a_confidential_client_with_the_owners_idp() -> None:
    request = parse_add(f"{BASE} --idp-client-id playa --id-token {ID_TOKEN}")
    grant = request.entry().oauth
    assert grant is not None and grant.enterprise and grant.client is not None
    assert grant.client.grant_types == [ENTERPRISE_GRANT]
    assert grant.idp is not None and (grant.idp.issuer, grant.idp.client_id) == (
        "https://idp.example",
        "playa",
    )
    assert ID_TOKEN in grant.secrets and ID_TOKEN not in repr(request)


@pytest.mark.parametrize("args", [f"{BASE} --id-token {ID_TOKEN}", f"{BASE} --id-token={ID_TOKEN}"])
def test_a_message_with_the_id_token_in_it_carries_a_secret(args: str) -> None:
    assert carries_secret(args)


async def test_the_id_token_asked_in_secret_is_taken_as_a_jwt() -> None:
    request = parse_add(f"{BASE} --id-token")
    ui = ScriptedUI(answers=[f"  {ID_TOKEN}  "])
    assert await ask_secrets(request, ui) is None
    ((question, secret),) = ui.asked
    assert secret and "ID token from https://idp.example" in question
    grant = request.entry().oauth
    assert grant is not None and grant.idp is not None and grant.idp.id_token == ID_TOKEN


async def test_an_answer_that_is_no_jwt_is_refused_unquoted() -> None:
    request = parse_add(f"{BASE} --id-token")
    with pytest.raises(ValidationError) as raised:
        await ask_secrets(request, ScriptedUI(answers=["my password is hunter2hunter2"]))
    assert "not a JWT" in str(raised.value) and "hunter2" not in str(raised.value)


@pytest.mark.parametrize(
    "idp", ["http://idp.example", "https://idp.example?x=1", "https://u@idp.example", "idp.example"]
)
def test_an_idp_that_is_no_https_issuer_is_refused(idp: str) -> None:
    with pytest.raises(ValidationError, match="--idp takes"):
        parse_add(f"corp https://mcp.example/mcp --grant enterprise --idp {idp}")


def test_a_key_and_the_enterprise_grant_do_not_go_together() -> None:
    with pytest.raises(ValidationError):
        parse_add(f"{BASE} --client-key --id-token")
