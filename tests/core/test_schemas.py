from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer
from pydantic_ai.tools import ToolDefinition

from playa.core import ToolResult, ToolRules, Withheld, repair_schema


@dataclass
class SchemaTool:
    name: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    description: str = "a tool"

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult("ok")


def test_arrays_get_items_at_every_depth_and_the_input_is_left_alone() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array"},
            "b": {"anyOf": [{"type": "array"}, {"type": "null"}]},
            "c": {"type": "array", "items": {"type": "array"}},
            "d": {"type": "array", "items": [{"type": "string"}]},
            "e": {"type": "array", "items": {"type": "string"}},
        },
        "$defs": {"X": {"type": ["array", "null"]}},
    }
    before = repr(schema)
    repaired = repair_schema(schema)
    props = repaired["properties"]
    assert props["a"]["items"] == {}
    assert props["b"]["anyOf"][0]["items"] == {}
    assert props["c"]["items"]["items"] == {}
    assert props["d"]["items"] == {"anyOf": [{"type": "string"}]}
    assert props["e"]["items"] == {"type": "string"}
    assert repaired["$defs"]["X"]["items"] == {}
    assert repr(schema) == before


def test_a_tool_is_withheld_with_a_reason_when_it_cannot_be_sent() -> None:
    rules = ToolRules(OpenAIJsonSchemaTransformer)
    assert isinstance(rules.definition(SchemaTool("fine")), ToolDefinition)
    assert rules.withheld(SchemaTool("bad name!")) == "its name is not 1 to 64 letters, digits, _ or -"
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(3000)}}
    reason = rules.withheld(SchemaTool("huge", huge))
    assert reason is not None and "KB allowed" in reason


def test_definitions_are_reused_until_the_tool_changes_and_descriptions_are_left_to_the_gate() -> None:
    rules = ToolRules()
    tool = SchemaTool("t", description="x" * 5000)
    first = rules.definition(tool)
    # Cut by the model-bound gate once redacted, never before.
    assert isinstance(first, ToolDefinition) and first.description == "x" * 5000
    assert rules.definition(tool) is first
    tool.parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}
    second = rules.definition(tool)
    assert second is not first and not isinstance(second, Withheld)
    assert second.parameters_json_schema["properties"] == {"n": {"type": "integer"}}
