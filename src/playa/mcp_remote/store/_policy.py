"""The owner's call policies: whether a server's tools may be called at once, after asking, or never.

A policy is ``allow``, ``ask`` or ``deny``, set for a whole server and, over it, for one tool;
what neither sets takes the host's default (``PLAYA_DEFAULT_POLICY``, ``allow`` unless the
operator says otherwise). The owner's choices are sealed with the server's entry under
``:policy``, like the pins: the agent's workspace tools cannot reach the file, and any other
writer's edit fails the seal, so the entry is refused as a whole rather than opened with a
looser policy. A server's own hints (``readOnlyHint`` and the like) never set one: only the
owner does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, get_args

from ...exceptions import ValidationError

__all__ = ["DECISIONS", "Decision", "Policy", "decision_of"]

Decision = Literal["allow", "ask", "deny"]
DECISIONS: Final[tuple[Decision, ...]] = get_args(Decision)
_VERSION: Final = 1
_MAX_TOOL_CHARS: Final = 256


def decision_of(text: str) -> Decision | None:
    """The decision ``text`` names (``allow``, ``ask``, ``deny``, any case), or None."""
    lowered = text.strip().lower()
    for decision in DECISIONS:
        if lowered == decision:
            return decision
    return None


@dataclass(frozen=True, slots=True)
class Policy:
    """One server's policies: its own (None: the host's default) and its tools', by the server's names."""

    server: Decision | None = None
    tools: Mapping[str, Decision] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", MappingProxyType(dict(sorted(self.tools.items()))))

    @property
    def empty(self) -> bool:
        """Nothing set: every tool takes the host's default."""
        return self.server is None and not self.tools

    def of(self, tool: str, default: Decision) -> Decision:
        """What applies to a call of ``tool``: its own policy, else the server's, else ``default``."""
        return self.tools.get(tool) or self.server or default

    def setting(self, tool: str | None, decision: Decision) -> Policy:
        """This policy with ``decision`` for ``tool`` (None: for the server; its tools' own stay)."""
        if tool is None:
            return Policy(decision, self.tools)
        return Policy(self.server, {**self.tools, tool: decision})

    def encode(self) -> str:
        """The policy as one JSON text, to be sealed with the entry."""
        return json.dumps(
            {"v": _VERSION, "server": self.server, "tools": dict(self.tools)},
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str) -> Policy:
        """Read a sealed policy; raises ``ValidationError`` (field ``policy``) on any other shape."""
        problem = ValidationError("policy", "the sealed call policy has an unknown format")
        try:
            raw = json.loads(text)
        except ValueError:
            raise problem from None
        if not isinstance(raw, dict) or set(raw) != {"v", "server", "tools"} or raw["v"] != _VERSION:
            raise problem
        server, tools = raw["server"], raw["tools"]
        if server is not None and server not in DECISIONS:
            raise problem
        if not isinstance(tools, dict) or not all(
            isinstance(name, str) and 0 < len(name) <= _MAX_TOOL_CHARS and value in DECISIONS
            for name, value in tools.items()
        ):
            raise problem
        return cls(server, tools)
