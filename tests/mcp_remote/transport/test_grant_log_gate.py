"""The log gate holds an OAuth grant's tokens while they may be logged, and no longer."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
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


_COLLECTED_UNDER_THE_LOCK = """
import gc
from mcp.shared.auth import OAuthToken
from playa.core import REDACTED, outbound_secrets
from playa.mcp_remote.store import OAuthGrant
from playa.mcp_remote.transport import GrantStorage

async def persist(grant):
    return None

token = "at-" + "q" * 40
gate = outbound_secrets()
grant = OAuthGrant("https://mcp.example/mcp").with_tokens(OAuthToken(access_token=token, token_type="Bearer"), now=0.0)
storage = GrantStorage(grant, persist)
storage.cycle = storage  # only a collection frees it
print("held" if token in gate else "not held")
del storage
# As while the gate learns a new secret's windows, thousands of allocations under its lock: a
# collection that one of them starts runs the grant's finalizer in this very thread.
with gate._lock:
    gc.collect()
    print("covered" if REDACTED in gate.pieces.redact(f"late: {token}") else "uncovered")
print("let go" if token not in gate else "still held")
"""


def test_a_grant_collected_while_the_gate_holds_its_lock_lets_go_later_without_stopping_the_thread() -> None:
    # In a process of its own: a finalizer that waited for the lock would stop it for ever.
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_COLLECTED_UNDER_THE_LOCK)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["held", "covered", "let go"]
