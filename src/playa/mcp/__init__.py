"""Helpers shared by any MCP integration: tool naming, schema normalization, result mapping.

Nothing here connects to a server; these are pure functions over what a server sent.
"""

from __future__ import annotations

from playa.mcp._naming import MAX_NAME_LENGTH, exposed_name, exposed_names
from playa.mcp._results import map_result
from playa.mcp._schema import normalize_schema

__all__ = [
    "MAX_NAME_LENGTH",
    "exposed_name",
    "exposed_names",
    "map_result",
    "normalize_schema",
]
