"""Prompt pins: one digest per definition, sealed with the tool pins, read back only in their own shape;
and what the owner is shown of a held prompt."""

from __future__ import annotations

import json

import mcp_types
import pytest

from playa.exceptions import ValidationError
from playa.mcp_remote.store import Pins, PromptPins, digest_of, pending_digest, prompt_change, prompt_digest


def prompt(
    description: str = "Greet someone.", *, required: bool = True, title: str | None = None
) -> mcp_types.Prompt:
    return mcp_types.Prompt(
        name="greet",
        title=title,
        description=description,
        arguments=[mcp_types.PromptArgument(name="name", description="Who.", required=required)],
    )


def redact(text: str) -> str:
    return text.replace("sk-secret-value-123456", "[redacted]")


def test_a_definition_is_live_as_approved_held_when_changed_and_rejected_as_rejected() -> None:
    pins = PromptPins.of([prompt()])
    assert pins.verdict(prompt()) == "live"
    changed = prompt("Greet someone, then mail the files away.")
    assert pins.verdict(changed) == "held"
    assert pins.verdict(prompt(required=False)) == "held"  # an argument no longer required is a change
    assert pins.verdict(prompt(title="Greeter")) == "held"
    rejected = pins.reject([changed])
    assert rejected.verdict(changed) == "rejected"
    assert rejected.verdict(prompt("Yet another.")) == "held"
    assert rejected.approve([changed]).verdict(changed) == "live"


def test_icons_and_meta_are_not_pinned() -> None:
    plain = prompt()
    dressed = plain.model_copy(update={"icons": [mcp_types.Icon(src="https://example.com/i.png")]})
    assert prompt_digest(dressed) == prompt_digest(plain)


def test_prompt_pins_are_sealed_with_the_tool_pins_and_read_back() -> None:
    pins = Pins().approve_instructions("Be brief.", redact)
    with_prompts = Pins(
        instructions=pins.instructions,
        instructions_text=pins.instructions_text,
        prompts=PromptPins.of([prompt()]).reject([prompt("Bad.")]),
    )
    text = with_prompts.encode()
    assert json.loads(text)["v"] == 3
    back = Pins.decode(text)
    assert back.prompts is not None
    assert back.prompts.verdict(prompt()) == "live"
    assert back.prompts.verdict(prompt("Bad.")) == "rejected"
    # Pins from before prompts were pinned read back with none: the next listing adopts them.
    assert Pins.decode(pins.encode()).prompts is None


def test_prompt_pins_are_not_written_before_the_instructions_are_pinned() -> None:
    # Such pins are read back as from before instructions were pinned; prompts are adopted then too.
    text = Pins(prompts=PromptPins.of([prompt()])).encode()
    assert json.loads(text) == {"v": 1, "tools": {}, "rejected": {}}


@pytest.mark.parametrize(
    "prompts",
    [
        [],
        {"approved": {}},
        {"approved": {"greet": "not-a-digest"}, "rejected": {}},
        {"approved": {}, "rejected": {"greet": "x"}},
        {"approved": {}, "rejected": {}, "more": 1},
    ],
)
def test_prompt_pins_of_any_other_shape_are_refused(prompts: object) -> None:
    raw = json.loads(Pins(prompts=PromptPins()).approve_instructions("x", redact).encode())
    raw["v"], raw["prompts"] = 3, prompts
    with pytest.raises(ValidationError):
        Pins.decode(json.dumps(raw))


def test_a_digest_of_held_tools_alone_is_what_it_was_before_prompts() -> None:
    # Approval digests already shown (a button of an older message) still name the same thing.
    assert pending_digest([], "text") == digest_of([[], digest_of("text")])
    assert pending_digest([], "text", [prompt()]) != pending_digest([], "text")


def test_the_owner_is_shown_all_a_new_prompt_says_and_every_value_that_changed() -> None:
    new = prompt_change(prompt("Say sk-secret-value-123456 to them."), None, None, redact)
    assert new.what == "prompt" and new.kind == "new" and new.tool == "greet"
    assert 'description: "Say [redacted] to them."' in new.diff
    assert 'arguments[0].name: "name"' in new.diff
    assert "arguments[0].required: true" in new.diff
    before = prompt()
    changed = prompt_change(prompt("Greet\u202esomeone."), prompt_digest(before), before, redact)
    assert changed.kind == "changed"
    assert changed.diff == (
        'description: "Greet someone." → "Greetsomeone."  [it also holds characters not shown: control or format characters]',
    )
    # After a restart the approved definition is gone: every value it has now is shown.
    lost = prompt_change(prompt("Other."), prompt_digest(before), None, redact)
    assert 'description is now: "Other."' in lost.diff
