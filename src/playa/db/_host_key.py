"""Which host secret seals a database's rows: its key id, recorded by the first process.

Every process of a deployment must seal with the same host secret, or each would fail to open
the others' rows, one row at a time, as if they had been tampered with. So the first process
records the key id of what it seals with (per purpose: the server store, the audit log…) and
every later one compares: another secret is refused at start, with both ids. A key id is
derived from the secret by a one-way function of its own and is shown in every seal already.
"""

from __future__ import annotations

from ..exceptions import ConfigError
from ._pool import Database

__all__ = ["claim_host_key"]


async def claim_host_key(database: Database, *, purpose: str, key_id: str) -> None:
    """Record ``key_id`` for ``purpose`` if none is, else check it is the one recorded.

    Raises ConfigError when the database's rows were sealed with another host secret.
    """
    async with database.transaction() as connection:
        await connection.execute(
            "INSERT INTO host_keys (purpose, key_id) VALUES ($1, $2) ON CONFLICT (purpose) DO NOTHING",
            purpose,
            key_id,
        )
        recorded = await connection.fetchval("SELECT key_id FROM host_keys WHERE purpose = $1", purpose)
    if recorded != key_id:
        raise ConfigError(
            f"the database's {purpose} rows are sealed with another host secret (key id {recorded}; "
            f"this process's is {key_id}): start every process with the same host secret"
        )
