"""A real PostgreSQL for these tests: one server per session (per xdist worker), a database per test."""

from support.postgres import database_url, postgres

__all__ = ["database_url", "postgres"]
