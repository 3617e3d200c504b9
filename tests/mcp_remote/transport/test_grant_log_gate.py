"""The log gate holds an OAuth grant's tokens while they may be logged, and no longer."""

from __future__ import annotations

import gc
import uuid

import pytest
from mcp.shared.auth import OAuthToken

from playa.core import outbound_secrets
from playa.mcp_remote.store import OAuthGrant
from playa.mcp_remote.transport import GrantStorage

pytestmark = pytest.mark.anyio


def token() -> OAuthToken:
    return OAuthToken(
        access_token="at-" + uuid.uuid4().hex + uuid.uuid4().hex,
        refresh_token="rt-" + uuid.uuid4().hex + uuid.uuid4().hex,
        expires_in=3600,
    )


async def test_a_grant_refreshed_again_and_again_holds_its_tokens_and_the_ones_they_replaced_only() -> None:
    async def persist(grant: OAuthGrant) -> None:
        return None

    first = token()
    storage = GrantStorage(OAuthGrant("https://mcp.example/mcp").with_tokens(first, now=0.0), persist)
    gate = outbound_secrets()
    assert first.access_token in gate
    issued = [first]
    for _ in range(20):
        issued.append(token())
        await storage.set_tokens(issued[-1])
    held = [t for t in issued if t.access_token in gate or (t.refresh_token or "") in gate]
    # A bot refreshes for ever: the gate keeps the newest tokens and the ones they replaced.
    assert held == issued[-2:]
    assert "at-" not in gate.pieces.redact(f"late record: {issued[-2].access_token}")
    del storage
    gc.collect()
    assert not any(t.access_token in gate or (t.refresh_token or "") in gate for t in issued)
