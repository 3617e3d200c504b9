"""A real PostgreSQL for these tests: one server per session (per xdist worker), a database per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from playa.db import Database, DatabaseUrl
from support.postgres import database_url, postgres

__all__ = ["database", "database_url", "postgres"]


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    """An open pool on this test's own empty database."""
    async with await Database.open(DatabaseUrl.parse(database_url)) as db:
        yield db
