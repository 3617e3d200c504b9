"""What the operator's ``playa db`` commands do, from the environment the command runs in."""

from __future__ import annotations

from collections.abc import Mapping

from ..exceptions import ConfigError
from ._migrations import Upgrade, upgrade
from ._pool import Database, PoolOptions
from ._url import ENV_DATABASE_URL, database_url

__all__ = ["upgrade_database"]


async def upgrade_database(environ: Mapping[str, str]) -> Upgrade:
    """``playa db upgrade``: upgrade the database ``PLAYA_DATABASE_URL`` names, on one connection."""
    url = database_url(environ)
    if url is None:
        raise ConfigError(
            f"{ENV_DATABASE_URL} is not set: set it to postgresql://user:password@host:5432/database"
        )
    async with await Database.open(url, PoolOptions(min_size=1, max_size=1)) as database:
        return await upgrade(database)
