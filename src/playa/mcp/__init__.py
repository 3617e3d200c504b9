"""Helpers shared by any MCP integration: tool naming, schema normalization, result mapping.

Nothing here connects to a server; these are pure functions over what a server sent.
"""

from __future__ import annotations

from ._naming import (
    MAX_NAME_LENGTH,
    RESERVED_SERVER_NAMES,
    exposed_name,
    exposed_names,
    is_server_name,
    server_name_problem,
)
from ._results import LinkHint, decode_base64, map_result
from ._schema import normalize_schema

__all__ = [
    "MAX_NAME_LENGTH",
    "RESERVED_SERVER_NAMES",
    "LinkHint",
    "decode_base64",
    "exposed_name",
    "exposed_names",
    "is_server_name",
    "map_result",
    "normalize_schema",
    "server_name_problem",
]
