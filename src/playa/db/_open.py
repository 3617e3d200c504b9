"""The database a ``playa chat`` or ``playa telegram`` keeps its chats' state in, opened at start."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping

from ..exceptions import ConfigError
from ._migrations import latest_version, schema_version
from ._pool import Database, PoolOptions
from ._storage import DatabaseStorage
from ._url import database_url

__all__ = ["open_storage"]


@contextlib.asynccontextmanager
async def open_storage(
    environ: Mapping[str, str], options: PoolOptions | None = None
) -> AsyncIterator[DatabaseStorage | None]:
    """The state's storage ``PLAYA_DATABASE_URL`` names, for the block; None when it is unset.

    Raises DatabaseError when the database cannot be reached, and ConfigError when its schema is
    not this Playa's (``playa db upgrade`` makes it so: a chat never upgrades a schema on its own,
    so several processes starting together never race to).
    """
    url = database_url(environ)
    if url is None:
        yield None
        return
    async with await Database.open(url, options) as database:
        version = await schema_version(database)
        if version != latest_version():
            raise ConfigError(
                f"the database at {url.where} has schema version {version}, and this Playa needs "
                f"{latest_version()}: run playa db upgrade"
            )
        yield DatabaseStorage(database)
