"""Exposed tool names: ``<server>__<tool>``, valid for every model provider, unique per server.

Providers accept tool names matching ``^[A-Za-z0-9_-]{1,64}$`` (OpenAI's rule, the strictest of
OpenAI, Anthropic and Google), while MCP tool names are free text. A name is sanitized, and
shortened with a hash of the original tool name when too long. Two tools whose names sanitize to
the same exposed name are told apart by the same hash, decided from the set of names rather than
the order the server lists them in, so the names survive a reconnect that reorders the listing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = [
    "MAX_NAME_LENGTH",
    "RESERVED_SERVER_NAMES",
    "exposed_name",
    "exposed_names",
    "is_server_name",
    "server_name_problem",
]

MAX_NAME_LENGTH = 64
"""The longest tool name every supported model provider accepts."""

_SEPARATOR = "__"
_HASH_LENGTH = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# No "_": the "__" between server and tool must be unambiguous.
_SERVER_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
RESERVED_SERVER_NAMES = frozenset({"mcp"})
"""Server "mcp" would give ``mcp__<tool>``, the prefix other hosts use for their own MCP tools;
a model (or a user reading a transcript) could take it for one of those."""


def is_server_name(text: str) -> bool:
    """Whether ``text`` has the form of a server name (reserved or not): such text is safe to quote."""
    return _SERVER_NAME.fullmatch(text) is not None


def server_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a server, for the owner; None when it can.

    The one rule for server names: commands, the store and the binder all ask here.
    """
    if not isinstance(name, str) or not is_server_name(name):
        return "the name must be 1-32 characters: a lowercase letter, then lowercase letters, digits or '-'"
    if name in RESERVED_SERVER_NAMES:
        return f"the name {name!r} is reserved; choose another"
    return None


def exposed_name(server: str, tool: str) -> str:
    """The exposed name of one tool, as if it were the server's only tool.

    Use :func:`exposed_names` for a whole listing: only it can resolve collisions.
    """
    return exposed_names(server, [tool])[tool]


def exposed_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """Map each MCP tool name of one server to its exposed name.

    Every value is unique, matches ``^[A-Za-z0-9_-]{1,64}$`` and starts with ``<server>__``.
    A tool's name depends only on the set of names given, never on their order. Raises
    ``ValueError`` for a server name that the command validation should have refused.
    """
    _check_server(server)
    prefix = server + _SEPARATOR
    originals = sorted(set(tools))

    by_plain: dict[str, list[str]] = {}
    for tool in originals:
        by_plain.setdefault(_plain(prefix, tool), []).append(tool)

    plain_winners: dict[str, str] = {}
    losers: list[str] = []
    for plain, group in by_plain.items():
        if len(plain) > MAX_NAME_LENGTH:
            losers.extend(group)
            continue
        # A name that needed no sanitizing keeps it: that is the common case, and it means
        # a well-named tool's exposed name never changes when an oddly named one appears.
        group.sort(key=lambda tool: (_UNSAFE.search(tool) is not None, tool))
        plain_winners[group[0]] = plain
        losers.extend(group[1:])

    taken = set(plain_winners.values())
    result = dict(plain_winners)
    for tool in sorted(losers):
        name = _hashed(prefix, tool, 0)
        attempt = 0
        # Only a clash of 8 hex digits, or a tool literally named like another's hashed
        # name, gets here; a counter in the hash input keeps the outcome deterministic.
        while name in taken:
            attempt += 1
            name = _hashed(prefix, tool, attempt)
        taken.add(name)
        result[tool] = name
    return result


def _check_server(server: str) -> None:
    if (problem := server_name_problem(server)) is not None:
        raise ValueError(f"invalid MCP server name {server!r}: {problem}")


def _plain(prefix: str, tool: str) -> str:
    return prefix + _UNSAFE.sub("_", tool)


def _hashed(prefix: str, tool: str, attempt: int) -> str:
    material = tool if attempt == 0 else f"{tool}\x00{attempt}"
    # surrogatepass: a JSON string may carry a lone surrogate, which strict UTF-8 refuses.
    digest = hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LENGTH]
    head = _plain(prefix, tool)[: MAX_NAME_LENGTH - _HASH_LENGTH - 1]
    return f"{head}_{digest}"
