"""Skill pins: sealed with the tool pins, read back as written, any other shape refused."""

from __future__ import annotations

import json

import pytest

from playa.exceptions import ValidationError
from playa.mcp_remote.store import (
    Pins,
    SkillPins,
    approval_digest,
    digest_of,
    pending_digest,
    same_definitions,
)

A = digest_of("entry a")
B = digest_of("entry b")


def test_skill_pins_say_live_held_or_rejected() -> None:
    pins = SkillPins().approve([("pdf", A)])
    assert pins.verdict("pdf", A) == "live"
    assert pins.verdict("pdf", B) == "held"
    assert pins.verdict("other", A) == "held"
    rejected = pins.reject([("pdf", B)])
    assert rejected.verdict("pdf", B) == "rejected"
    assert rejected.verdict("pdf", A) == "live"


def test_skill_pins_are_sealed_with_the_tool_pins_and_read_back() -> None:
    pins = Pins().approve_instructions("Use it.", str)
    with_skills = Pins(pins.tools, instructions=pins.instructions, instructions_text="Use it.")
    sealed = Pins.decode(
        Pins(
            with_skills.tools,
            instructions=with_skills.instructions,
            instructions_text=with_skills.instructions_text,
            skills=SkillPins({"pdf": A}, {"pdf": frozenset({B})}),
        ).encode()
    )
    assert sealed.skills == SkillPins({"pdf": A}, {"pdf": frozenset({B})})
    # Pins from before skills were pinned have none: their server's first listing adopts them.
    assert Pins.decode(with_skills.encode()).skills is None


@pytest.mark.parametrize(
    "skills",
    [
        {"approved": {"pdf": "not a digest"}, "rejected": {}},
        {"approved": {}, "rejected": {"pdf": "not a list"}},
        {"approved": {}},
        ["approved"],
    ],
)
def test_sealed_skill_pins_of_another_shape_are_refused(skills: object) -> None:
    raw = json.loads(Pins().approve_instructions("Use it.", str).encode())
    raw["skills"] = skills
    with pytest.raises(ValidationError, match="unknown format"):
        Pins.decode(json.dumps(raw))


def test_skills_without_pinned_instructions_are_refused() -> None:
    raw = json.loads(Pins().encode())
    raw["skills"] = SkillPins({"pdf": A}).encode()
    with pytest.raises(ValidationError, match="unknown format"):
        Pins.decode(json.dumps(raw))


def test_a_held_skill_is_part_of_the_definitions_an_approval_names() -> None:
    """Held skills are in the definitions half of an approval's digest, as held tools and prompts are."""
    none = approval_digest([], None, (), ())
    held_a = approval_digest([], None, (), (), skills=[("pdf", A)])
    held_b = approval_digest([], None, (), (), skills=[("pdf", B)])
    assert len({none, held_a, held_b}) == 3
    assert not same_definitions(held_a, held_b)
    assert same_definitions(held_a, approval_digest([], None, (), (), skills=[("pdf", A)]))
    assert pending_digest([], None, skills=[("pdf", A)]) != pending_digest([])
