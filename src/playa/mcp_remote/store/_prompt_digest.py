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

from collections.abc import Iterable
from typing import Any

import mcp_types

from ._digests import DigestPins, Verdict, digest_of

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


class PromptPins(DigestPins):
    """A server's approved prompt definitions (name → digest) and rejected ones (name → digests)."""

    @classmethod
    def of(cls, prompts: Iterable[mcp_types.Prompt]) -> PromptPins:
        """Every definition given, approved: what a server's first listing adopts."""
        return cls({prompt.name: prompt_digest(prompt) for prompt in prompts})

    def verdict(self, prompt: mcp_types.Prompt) -> Verdict:
        """Whether the prompt is as approved, rejected as it is, or waits for the owner."""
        return self.verdict_of(prompt.name, prompt_digest(prompt))

    def approve(self, prompts: Iterable[mcp_types.Prompt]) -> PromptPins:
        return self.with_approved((prompt.name, prompt_digest(prompt)) for prompt in prompts)

    def reject(self, prompts: Iterable[mcp_types.Prompt]) -> PromptPins:
        return self.with_rejected((prompt.name, prompt_digest(prompt)) for prompt in prompts)
