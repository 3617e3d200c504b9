"""The owner's ``/mcp_*`` commands, grouped by what they manage: the chat's servers (add, remove,
restore, list), logins, the decisions on changed tools, call policies, and the audit log.

Each command's arguments are parsed once into what its handler uses (``/mcp_add``'s into an
:class:`AddRequest`, its secrets asked for last); a handler calls only the public methods of the
chat's servers service (``ChatServers``), never the extension or the service's parts.
"""

from __future__ import annotations

from ._access import OpenServers
from ._add_request import RESERVED_HEADERS, USAGE, AddRequest, carries_secret, check_secret, parse_add
from ._build import build_commands

__all__ = [
    "RESERVED_HEADERS",
    "USAGE",
    "AddRequest",
    "OpenServers",
    "build_commands",
    "carries_secret",
    "check_secret",
    "parse_add",
]
