"""The host secret's key id: recorded by the first process, required of every later one."""

from __future__ import annotations

import pytest

from playa.db import Database, claim_host_key, upgrade
from playa.exceptions import ConfigError

pytestmark = pytest.mark.anyio


async def test_every_process_must_seal_with_the_host_secret_the_first_one_recorded(
    database: Database,
) -> None:
    await upgrade(database)
    await claim_host_key(database, purpose="servers", key_id="0123456789abcdef")
    await claim_host_key(database, purpose="servers", key_id="0123456789abcdef")
    await claim_host_key(database, purpose="audit", key_id="fedcba9876543210")
    with pytest.raises(ConfigError, match="key id 0123456789abcdef; this process's is 1111111111111111"):
        await claim_host_key(database, purpose="servers", key_id="1111111111111111")
