"""A server's prompt definitions pinned by digest.

A prompt reaches the model only as the text its server renders when a person runs it
(``/prompt``); what the owner approves is its definition: the name, title and description a
person picks it by, and the arguments it asks for (each one's name, title, description and
whether it is required). A server could change a prompt after the owner added it (a new
description that says something else, a new argument that asks the person for a secret), so
each definition is pinned as one digest of its canonical JSON, sealed with the tool pins
(``Pins.prompts``). A prompt whose definition matches its pin can be run; a new or changed one
is held until the owner approves it; one the owner rejected stays held, silently, until it
changes again. Icons and ``_meta`` are not pinned: nothing of them reaches a person or the model.

A prompt's digest covers the whole definition, not each field: what a change shows after a
restart (when the approved definition is gone from memory) is all that the prompt says now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import mcp_types

from ._digests import Verdict, digest_of, is_digest

__all__ = ["PromptPins", "prompt_definition", "prompt_digest"]


def prompt_definition(prompt: mcp_types.Prompt) -> dict[str, Any]:
    """What of a prompt is pinned, as JSON: its name, title, description and arguments."""
    arguments = [
        {
            "name": argument.name,
            "title": argument.title,
            "description": argument.description,
            "required": bool(argument.required),
        }
        for argument in prompt.arguments or ()
    ]
    return {
        "name": prompt.name,
        "title": prompt.title,
        "description": prompt.description,
        "arguments": arguments,
    }


def prompt_digest(prompt: mcp_types.Prompt) -> str:
    """The digest of a prompt's pinned definition."""
    return digest_of(prompt_definition(prompt))


@dataclass(frozen=True)
class PromptPins:
    """A server's approved prompt definitions (name → digest) and rejected ones (name → digests)."""

    approved: Mapping[str, str] = field(default_factory=dict)
    rejected: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "approved", MappingProxyType(dict(self.approved)))
        rejected = {name: frozenset(digests) for name, digests in self.rejected.items()}
        object.__setattr__(self, "rejected", MappingProxyType(rejected))

    @classmethod
    def of(cls, prompts: Iterable[mcp_types.Prompt]) -> PromptPins:
        """Every definition given, approved: what a server's first listing adopts."""
        return cls({prompt.name: prompt_digest(prompt) for prompt in prompts})

    def verdict(self, prompt: mcp_types.Prompt) -> Verdict:
        """Whether the prompt is as approved, rejected as it is, or waits for the owner."""
        digest = prompt_digest(prompt)
        if self.approved.get(prompt.name) == digest:
            return "live"
        return "rejected" if digest in self.rejected.get(prompt.name, frozenset()) else "held"

    def approve(self, prompts: Iterable[mcp_types.Prompt]) -> PromptPins:
        approved = {prompt.name: prompt_digest(prompt) for prompt in prompts}
        return replace(self, approved={**self.approved, **approved})

    def reject(self, prompts: Iterable[mcp_types.Prompt]) -> PromptPins:
        rejected = dict(self.rejected)
        for prompt in prompts:
            rejected[prompt.name] = rejected.get(prompt.name, frozenset()) | {prompt_digest(prompt)}
        return replace(self, rejected=rejected)

    def encode(self) -> dict[str, object]:
        """The pins as JSON, for ``Pins.encode``."""
        return {
            "approved": dict(self.approved),
            "rejected": {name: sorted(digests) for name, digests in self.rejected.items()},
        }

    @classmethod
    def decode(cls, raw: object) -> PromptPins | None:
        """Read what ``encode`` wrote; None for any other shape (the caller says the pins are bad)."""
        if not isinstance(raw, dict) or set(raw) != {"approved", "rejected"}:
            return None
        approved, rejected = raw["approved"], raw["rejected"]
        if not isinstance(approved, dict) or not isinstance(rejected, dict):
            return None
        if not all(is_digest(value) for value in approved.values()):
            return None
        for digests in rejected.values():
            if not isinstance(digests, list) or not all(is_digest(value) for value in digests):
                return None
        return cls(approved, {name: frozenset(digests) for name, digests in rejected.items()})
