"""The owner's call policies: whether a server's tools may be called at once, after asking, or never.

A policy is ``allow``, ``ask`` or ``deny``, set for a whole server and, over it, for one tool;
what neither sets takes the host's default (``PLAYA_DEFAULT_POLICY``, ``allow`` unless the
operator says otherwise). The owner's choices are sealed with the server's entry under
``:policy``, like the pins: the agent's workspace tools cannot reach the file, and any other
writer's edit fails the seal, so the entry is refused as a whole rather than opened with a
looser policy. A server's own hints (``readOnlyHint`` and the like) never set one: only the
owner does.

Beside the decision, the owner may mark a server or one of its tools read-only: the flow guard
lets data of other sources flow into a tool so marked (it cannot send anything out), where it
would otherwise hold the call. The mark is sealed the same way, and a server's ``readOnlyHint``
never sets it: a hostile server would call its write tool read-only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal, get_args

from ...exceptions import ValidationError
from ._read_only import read_only

__all__ = ["DECISIONS", "READ_ONLY_MARKS", "Decision", "Policy", "decision_of", "read_only_of"]

Decision = Literal["allow", "ask", "deny"]
DECISIONS: Final[tuple[Decision, ...]] = get_args(Decision)
_VERSION: Final = 2
_VERSIONS: Final = {1: {"v", "server", "tools"}, 2: {"v", "server", "tools", "read_only"}}
READ_ONLY_MARKS: Final = {"read-only": True, "not-read-only": False}
"""The words of ``/mcp_policy`` that mark a server or tool read-only, or take the mark away."""
_MAX_TOOL_CHARS: Final = 256


def decision_of(text: str) -> Decision | None:
    """The decision ``text`` names (``allow``, ``ask``, ``deny``, any case), or None."""
    lowered = text.strip().lower()
    for decision in DECISIONS:
        if lowered == decision:
            return decision
    return None


def read_only_of(text: str) -> bool | None:
    """The read-only mark ``text`` names (``read-only``: True, ``not-read-only``: False, any case), or None."""
    return READ_ONLY_MARKS.get(text.strip().lower())


@dataclass(frozen=True, slots=True)
class Policy:
    """One server's policies: its own (None: the host's default) and its tools', by the server's
    names; and the owner's read-only marks, the server's (None: not marked) and its tools'."""

    server: Decision | None = None
    tools: Mapping[str, Decision] = field(default_factory=dict)
    read_only: bool | None = None
    read_only_tools: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", read_only(dict(sorted(self.tools.items()))))
        object.__setattr__(self, "read_only_tools", read_only(dict(sorted(self.read_only_tools.items()))))

    @property
    def empty(self) -> bool:
        """Nothing set: every tool takes the host's default, and none is read-only."""
        return self.server is None and not self.tools and self.read_only is None and not self.read_only_tools

    def is_read_only(self, tool: str) -> bool:
        """Whether the owner marked ``tool`` read-only: its own mark, else the server's, else not."""
        mark = self.read_only_tools.get(tool)
        return mark if mark is not None else self.read_only is True

    def marking(self, tool: str | None, read_only: bool) -> Policy:
        """This policy with the read-only mark ``read_only`` for ``tool`` (None: for the server; its
        tools' own marks stay)."""
        if tool is None:
            return replace(self, read_only=read_only)
        return replace(self, read_only_tools={**self.read_only_tools, tool: read_only})

    def of(self, tool: str, default: Decision) -> Decision:
        """What applies to a call of ``tool``: its own policy, else the server's, else ``default``."""
        return self.tools.get(tool) or self.server or default

    def setting(self, tool: str | None, decision: Decision) -> Policy:
        """This policy with ``decision`` for ``tool`` (None: for the server; its tools' own stay)."""
        if tool is None:
            return replace(self, server=decision)
        return replace(self, tools={**self.tools, tool: decision})

    def encode(self) -> str:
        """The policy as one JSON text, to be sealed with the entry."""
        return json.dumps(
            {
                "v": _VERSION,
                "server": self.server,
                "tools": dict(self.tools),
                "read_only": {"server": self.read_only, "tools": dict(self.read_only_tools)},
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str) -> Policy:
        """Read a sealed policy (this version's, or the first's, which had no read-only marks);
        raises ``ValidationError`` (field ``policy``) on any other shape."""
        problem = ValidationError("policy", "the sealed call policy has an unknown format")
        try:
            raw = json.loads(text)
        except ValueError:
            raise problem from None
        version = raw.get("v") if isinstance(raw, dict) else None
        if type(version) is not int or _VERSIONS.get(version) != set(raw):
            raise problem
        server, tools = raw["server"], raw["tools"]
        if server is not None and server not in DECISIONS:
            raise problem
        if not _tool_map(tools, lambda value: value in DECISIONS):
            raise problem
        marks = raw.get("read_only", {"server": None, "tools": {}})
        if (
            not isinstance(marks, dict)
            or set(marks) != {"server", "tools"}
            or not (marks["server"] is None or isinstance(marks["server"], bool))
            or not _tool_map(marks["tools"], lambda value: isinstance(value, bool))
        ):
            raise problem
        return cls(server, tools, marks["server"], marks["tools"])


def _tool_map(value: object, valid: Callable[[object], bool]) -> bool:
    """Whether ``value`` maps tool names to values ``valid`` accepts."""
    return isinstance(value, dict) and all(
        isinstance(name, str) and 0 < len(name) <= _MAX_TOOL_CHARS and valid(item)
        for name, item in value.items()
    )
