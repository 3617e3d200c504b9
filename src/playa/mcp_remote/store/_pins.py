"""Tool definitions pinned by digest: what the owner approved, what changed since, and how it is shown.

A server may change what a tool says it does after the owner added it (a "rug pull": a new
description that tells the model to send the chat's files somewhere). So each exposed tool's
definition — name, title, description, input and output schema, annotations — is pinned when
the server is added, as one digest per field of its canonical JSON (SHA-256 cut to 128 bits,
base64url: a second preimage stays out of reach, and a thousand tools' pins stay small), sealed
with the entry. A tool whose definition matches its pin is live; one that does not, or a new one, is
held back from the model until the owner approves it; one whose definition the owner
rejected stays hidden, silently, until it changes again.

Digests per field, not one per tool: after a restart the definitions the owner approved are
gone from memory, and the field digests still say which parts changed.

The server's ``instructions`` reach the model too (in its part of the prompt section), and a
server can change them as it can a tool. So they are pinned the same way: their digest, with
the approved text itself (bounded) so that the model keeps getting it after a restart while a
change waits; changed instructions are held, and shown as the lines that changed. Instructions
the server drops go at once, as a removed tool does: less of the server's text is no risk.

How a held change is shown to the owner, and the digest of that view: ``_pin_views``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

import mcp_types

from ...exceptions import ValidationError
from ._digests import DIGEST_CHARS, NULL_DIGEST, Verdict, canonical, digest_of, is_digest
from ._prompt_digest import PromptPins, prompt_digest
from ._read_only import read_only
from ._skill_pins import SkillPins

__all__ = [
    "DIGEST_CHARS",
    "INSTRUCTIONS_KEPT",
    "PIN_FIELDS",
    "Pins",
    "Verdict",
    "canonical",
    "definition",
    "digest_of",
    "field_digests",
    "instructions_digest",
    "pending_digest",
]

PIN_FIELDS: Final = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
_VERSION: Final = 2
_VERSIONS: Final = {
    1: {"v", "tools", "rejected"},
    2: {"v", "tools", "rejected", "instructions"},
    3: {"v", "tools", "rejected", "instructions", "prompts"},
}
"""What each version holds: 1 is from before instructions were pinned, 2 from before prompts were
(an entry adopts what it lacks once, at its server's first listing of it). Pinned instructions may
come with the server's skills (``skills``), a key of their own: pins without it adopt them too."""
INSTRUCTIONS_KEPT: Final = 16_000
"""Characters of the approved instructions kept with the pins (redacted): far more than the prompt shows."""


def definition(tool: mcp_types.Tool) -> dict[str, Any]:
    """The pinned fields of a tool's definition, as JSON."""
    raw = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {name: raw.get(name) for name in PIN_FIELDS}


_DIGESTS_KEPT: Final = 4096
_digests: dict[bytes, tuple[str, ...]] = {}
"""Field digests by the SHA-256 of the whole definition's JSON: every chat of a bot that uses one
server binds the same definitions (after a restart, all at once), and a dump and its hash cost a
fifth of the six canonical encodings. Digests in, digests out: no definition text is kept."""


def field_digests(tool: mcp_types.Tool) -> tuple[str, ...]:
    """One digest per pinned field of the tool's definition, in ``PIN_FIELDS`` order (absent: null).

    Read from the fields themselves rather than a dump of the whole tool: a server of ten
    thousand tools is pinned at every listing, and most fields are absent. Kept by content
    (``_digests``): the same definition is digested once.
    """
    key = hashlib.sha256(tool.model_dump_json(by_alias=True).encode()).digest()
    if (known := _digests.get(key)) is not None:
        return known
    digests = _field_digests(tool)
    if len(_digests) >= _DIGESTS_KEPT:
        del _digests[next(iter(_digests))]  # the oldest
    _digests[key] = digests
    return digests


def _field_digests(tool: mcp_types.Tool) -> tuple[str, ...]:
    annotations = tool.annotations
    values = (
        tool.name,
        tool.title,
        tool.description,
        tool.input_schema,
        tool.output_schema,
        None
        if annotations is None
        else annotations.model_dump(by_alias=True, mode="json", exclude_none=True),
    )
    return tuple(NULL_DIGEST if value is None else digest_of(value) for value in values)


def _digest(fields: Iterable[str]) -> str:
    return digest_of(list(fields))


def instructions_digest(text: str | None) -> str:
    """The digest of a server's instructions (of none: the digest of null)."""
    return NULL_DIGEST if text is None else digest_of(text)


def pending_digest(
    tools: Iterable[mcp_types.Tool],
    instructions: str | None = None,
    prompts: Iterable[mcp_types.Prompt] = (),
    skills: Iterable[tuple[str, str]] = (),
) -> str:
    """One digest of held definitions and held instructions: what the owner was shown must be what they approve.

    ``skills`` are the held skills as (path, the digest of their entry).
    """
    held = sorted([tool.name, _digest(field_digests(tool))] for tool in tools)
    pending: list[object] = [held, None if instructions is None else instructions_digest(instructions)]
    held_prompts = sorted([prompt.name, prompt_digest(prompt)] for prompt in prompts)
    held_skills = sorted([path, digest] for path, digest in skills)
    if held_prompts or held_skills:
        pending.append(held_prompts)
    if held_skills:
        pending.append(held_skills)
    return digest_of(pending)


@dataclass(frozen=True)
class Pins:
    """A server's approved definitions (tool → field digests) and rejected ones (tool → digests);
    its approved instructions (digest and text) and rejected ones (digests)."""

    tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rejected: Mapping[str, frozenset[str]] = field(default_factory=dict)
    instructions: str | None = None
    """The digest of the approved instructions; None until they are pinned (an entry from before)."""
    instructions_text: str | None = None
    """The approved instructions (their first ``INSTRUCTIONS_KEPT`` characters); None: none approved."""
    rejected_instructions: frozenset[str] = frozenset()
    prompts: PromptPins | None = None
    """The approved and rejected prompt definitions; None until they are pinned (an entry from before)."""
    skills: SkillPins | None = None
    """The approved and rejected skill entries; None until they are pinned (an entry from before)."""

    def __post_init__(self) -> None:
        tools = {name: tuple(fields) for name, fields in self.tools.items()}
        object.__setattr__(self, "tools", read_only(tools))
        rejected = {name: frozenset(digests) for name, digests in self.rejected.items()}
        object.__setattr__(self, "rejected", read_only(rejected))
        object.__setattr__(self, "rejected_instructions", frozenset(self.rejected_instructions))

    @classmethod
    def of(cls, tools: Iterable[mcp_types.Tool]) -> Pins:
        """Every definition given, approved: what an add (or an entry from before pins) adopts."""
        return cls({tool.name: field_digests(tool) for tool in tools})

    def verdict(self, tool: mcp_types.Tool, fields: tuple[str, ...] | None = None) -> Verdict:
        """Whether the tool is as approved, rejected as it is, or waits; ``fields``: its digests, if known."""
        fields = field_digests(tool) if fields is None else fields
        if self.tools.get(tool.name) == fields:
            return "live"
        if _digest(fields) in self.rejected.get(tool.name, frozenset()):
            return "rejected"
        return "held"

    def approve(self, tools: Iterable[mcp_types.Tool]) -> Pins:
        approved = {tool.name: field_digests(tool) for tool in tools}
        return replace(self, tools={**self.tools, **approved})

    def reject(self, tools: Iterable[mcp_types.Tool]) -> Pins:
        rejected = dict(self.rejected)
        for tool in tools:
            rejected[tool.name] = rejected.get(tool.name, frozenset()) | {_digest(field_digests(tool))}
        return replace(self, rejected=rejected)

    def only(self, names: Iterable[str]) -> Pins:
        """The pins of these tools only: a tool the server no longer lists is new if it comes back."""
        keep = set(names)
        return replace(
            self,
            tools={name: fields for name, fields in self.tools.items() if name in keep},
            rejected={name: digests for name, digests in self.rejected.items() if name in keep},
        )

    def instructions_verdict(self, text: str | None) -> Verdict:
        """Whether the server's instructions are as approved (or none), rejected as they are, or wait.

        Pins from before instructions were pinned have none to compare with: the caller adopts
        the text first (``approve_instructions``).
        """
        digest = instructions_digest(text)
        if text is None or digest == self.instructions:
            return "live"
        return "rejected" if digest in self.rejected_instructions else "held"

    def approve_instructions(self, text: str | None, redact: Callable[[str], str]) -> Pins:
        """Approve these instructions; their text is kept redacted (then cut: never the head of a key)."""
        kept = None if text is None else redact(text)[:INSTRUCTIONS_KEPT]
        return replace(self, instructions=instructions_digest(text), instructions_text=kept)

    def reject_instructions(self, text: str) -> Pins:
        return replace(self, rejected_instructions=self.rejected_instructions | {instructions_digest(text)})

    def encode(self) -> str:
        """The pins as one JSON text, to be sealed with the entry."""
        raw: dict[str, object] = {
            "v": _VERSION,
            "tools": {name: list(fields) for name, fields in self.tools.items()},
            "rejected": {name: sorted(digests) for name, digests in self.rejected.items()},
        }
        if self.instructions is None:
            raw["v"] = 1  # not pinned yet: read back as from before, so they are adopted then
        else:
            raw["instructions"] = {
                "digest": self.instructions,
                "text": self.instructions_text,
                "rejected": sorted(self.rejected_instructions),
            }
            if self.prompts is not None:
                raw["v"], raw["prompts"] = 3, self.prompts.encode()
            if self.skills is not None:
                raw["skills"] = self.skills.encode()
        return json.dumps(raw, sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> Pins:
        """Read sealed pins; raises ``ValidationError`` (field ``pins``) on any other shape."""
        problem = ValidationError("pins", "the sealed tool pins have an unknown format")
        try:
            raw = json.loads(text)
        except ValueError:
            raise problem from None
        if not isinstance(raw, dict) or type(version := raw.get("v")) is not int:
            raise problem
        if _VERSIONS.get(version) != set(raw) - ({"skills"} if "instructions" in raw else set()):
            raise problem
        tools, rejected = raw["tools"], raw["rejected"]
        if not isinstance(tools, dict) or not isinstance(rejected, dict):
            raise problem
        for fields in tools.values():
            if not isinstance(fields, list) or len(fields) != len(PIN_FIELDS):
                raise problem
            if not all(is_digest(value) for value in fields):
                raise problem
        for digests in rejected.values():
            if not isinstance(digests, list) or not all(is_digest(value) for value in digests):
                raise problem
        pins = cls(tools, {name: frozenset(digests) for name, digests in rejected.items()})
        if "instructions" not in raw:
            return pins
        instructions = raw["instructions"]
        if not isinstance(instructions, dict) or set(instructions) != {"digest", "text", "rejected"}:
            raise problem
        digest, kept, refused = instructions["digest"], instructions["text"], instructions["rejected"]
        if not is_digest(digest) or not (kept is None or isinstance(kept, str)):
            raise problem
        if kept is not None and len(kept) > INSTRUCTIONS_KEPT:
            raise problem
        if not isinstance(refused, list) or not all(is_digest(value) for value in refused):
            raise problem
        prompts = None
        if "prompts" in raw and (prompts := PromptPins.decode(raw["prompts"])) is None:
            raise problem
        skills = None
        if "skills" in raw and (skills := SkillPins.decode(raw["skills"])) is None:
            raise problem
        return replace(
            pins,
            instructions=digest,
            instructions_text=kept,
            rejected_instructions=frozenset(refused),
            prompts=prompts,
            skills=skills,
        )
