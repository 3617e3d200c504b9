from __future__ import annotations

import copy
import json
import math
import time
import uuid
from typing import Any

import anyio
import mcp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from playa.mcp import normalize_schema

EMPTY = {"type": "object", "properties": {}}


def assert_acceptable(schema: dict[str, Any]) -> None:
    """What every provider needs from a tool's parameters."""
    assert schema["type"] == "object"
    assert isinstance(schema["properties"], dict)
    assert "$schema" not in schema
    for key in ("anyOf", "oneOf", "allOf", "not", "enum", "$ref"):
        assert key not in schema
    if "required" in schema:
        assert isinstance(schema["required"], list)
        assert schema["required"]
        assert all(name in schema["properties"] for name in schema["required"])
        assert len(set(schema["required"])) == len(schema["required"])
    json.dumps(schema, allow_nan=False)


_KEPT = {
    "type": "object",
    "properties": {"p": {"$ref": "#/$defs/P"}, "q": {"$ref": "#/definitions/Q"}},
    "$defs": {"P": {"type": "string"}},
    "definitions": {"Q": {"type": "number"}},
    "additionalProperties": False,
}
"""Definitions and additional properties, all valid: kept as they are."""

NORMALIZED = [
    pytest.param(
        {"type": ["object", "null"], "properties": {"q": {"type": "string"}}},
        {"type": "object", "properties": {"q": {"type": "string"}}},
        id="a_nullable_object_root_becomes_a_plain_object",
    ),
    pytest.param(
        {"type": "string", "properties": {"q": {"type": "string"}}, "enum": ["a"]},
        {"type": "object", "properties": {"q": {"type": "string"}}},
        id="a_root_of_another_type_is_forced_to_object_and_keeps_its_properties",
    ),
    pytest.param(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:tool",
            "type": "object",
            "title": "Args",
            "description": "what it takes",
            "properties": {"n": {"type": "integer", "minimum": 0}},
        },
        {
            "type": "object",
            "title": "Args",
            "description": "what it takes",
            "properties": {"n": {"type": "integer", "minimum": 0}},
        },
        id="schema_and_id_are_dropped_and_other_keywords_kept",
    ),
    pytest.param(
        {"type": "object", "required": ["x"]},
        EMPTY,
        id="required_naming_only_missing_properties_is_dropped",
    ),
    pytest.param(
        {"type": "object", "properties": ["a", "b"]},
        EMPTY,
        id="properties_that_are_not_a_dict_become_empty",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"any": True, "odd": 5, "never": False},
            "required": ["any", "odd", "never"],
        },
        {
            "type": "object",
            "properties": {"any": {}, "odd": {}},
            "required": ["any", "odd"],
        },
        id="a_property_that_is_not_a_schema_accepts_anything_and_a_false_one_is_hidden",
    ),
    pytest.param(_KEPT, _KEPT, id="definitions_and_additional_properties_are_kept_when_valid"),
    pytest.param(
        {"type": "object", "$defs": [1], "definitions": "x", "additionalProperties": "no"},
        EMPTY,
        id="definitions_and_additional_properties_of_the_wrong_kind_are_dropped",
    ),
    pytest.param(
        {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "a": {}},
                    "required": ["id", "a"],
                },
                {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "b": {}},
                    "required": ["id", "b"],
                },
            ]
        },
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "a": {}, "b": {}},
            "required": ["id"],
        },
        id="root_any_of_branches_are_folded_into_one_object",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"x": {}},
            "allOf": [{"properties": {"y": {}}, "required": ["y"]}, {"required": ["x"]}],
        },
        {
            "type": "object",
            "properties": {"x": {}, "y": {}},
            "required": ["y", "x"],
        },
        id="root_all_of_branches_add_up_their_required_names",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"n": {"type": "number", "maximum": math.inf, "default": object()}},
            "x-extra": {1: "int key", "ok": (1, 2)},
        },
        {
            "type": "object",
            "properties": {"n": {"type": "number", "maximum": None, "default": None}},
            "x-extra": {"ok": [1, 2]},
        },
        id="non_json_values_are_dropped_from_the_copy",
    ),
]
"""Schemas as servers send them, and as the model is given them."""


@pytest.mark.parametrize(("schema", "normalized"), NORMALIZED)
def test_a_schema_is_normalized_to_what_every_provider_takes(
    schema: object, normalized: dict[str, Any]
) -> None:
    assert normalize_schema(schema) == normalized


def test_a_schema_kept_by_its_key_is_given_out_as_a_fresh_copy_of_the_same_schema() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "properties": {"q": {"type": "string", "enum": ["a", "b"]}, "n": {"type": "number", "default": 1.5}},
        "required": ["q", "gone"],
    }
    key = uuid.uuid4().bytes
    first = normalize_schema(schema, key=key)
    second = normalize_schema(schema, key=key)
    assert first == second == normalize_schema(schema)
    assert list(second) == list(first) and list(second["properties"]) == ["q", "n"]
    # Each call's schema is its own: changing one changes no other, nor what is kept.
    second["properties"]["q"]["enum"].append("c")
    assert normalize_schema(schema, key=key)["properties"]["q"]["enum"] == ["a", "b"]
    assert first["properties"]["q"]["enum"] == ["a", "b"]
    # The key names the schema: the one kept by it is not walked again.
    assert normalize_schema(None, key=key) == first
    # Another key is another schema.
    other = normalize_schema({"properties": {"x": {"type": "integer"}}}, key=uuid.uuid4().bytes)
    assert other["properties"] == {"x": {"type": "integer"}}


def test_kept_schemas_are_bounded_the_oldest_going_first() -> None:
    def schema(n: int, chars: int) -> dict[str, Any]:
        return {"properties": {"x": {"type": "string", "description": f"{n} " + "d" * chars}}}

    too_large = uuid.uuid4().bytes
    assert normalize_schema(schema(0, 300_000), key=too_large)["properties"]["x"]["description"].startswith(
        "0 "
    )
    assert normalize_schema(None, key=too_large) == EMPTY  # over 256 KiB: not kept
    keys = [uuid.uuid4().bytes for _ in range(40)]
    for n, key in enumerate(keys):
        normalize_schema(schema(n, 250_000), key=key)
    # 8 MiB hold 33 of them: the first ones went, the last ones stay.
    assert normalize_schema(None, key=keys[0]) == EMPTY
    assert normalize_schema(None, key=keys[-1])["properties"]["x"]["description"].startswith("39 ")


def test_a_schema_that_cannot_be_kept_as_json_is_normalized_each_time() -> None:
    # Python writes no integer of over 4,300 digits as text; a server may send one all the same.
    schema = {"properties": {"n": {"type": "integer", "maximum": 10**5000}}}
    key = uuid.uuid4().bytes
    for _ in range(2):
        assert normalize_schema(schema, key=key)["properties"] == schema["properties"]
    assert normalize_schema(None, key=key) == EMPTY


@pytest.mark.parametrize("schema", [None, "string", 3, [], True, {}, {"type": "object"}])
def test_a_missing_or_non_object_schema_becomes_an_empty_object_schema(schema: object) -> None:
    assert normalize_schema(schema) == EMPTY


def test_required_keeps_only_names_of_existing_properties_once() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {}, "b": {}},
        "required": ["b", "ghost", "a", 7, "b"],
    }
    assert normalize_schema(schema)["required"] == ["b", "a"]


@pytest.mark.parametrize("required", ["a", True, {"a": True}, 3])
def test_a_required_that_is_not_a_list_is_repaired_or_dropped(required: object) -> None:
    result = normalize_schema({"type": "object", "properties": {"a": {}}, "required": required})
    assert result.get("required") == (["a"] if required == "a" else None)
    assert_acceptable(result)


class Node(BaseModel):
    label: str
    children: list[Node] = []


def test_a_root_ref_of_a_recursive_pydantic_model_is_inlined() -> None:
    schema = Node.model_json_schema()
    assert schema["$ref"] == "#/$defs/Node"
    result = normalize_schema(schema)
    assert_acceptable(result)
    assert set(result["properties"]) == {"label", "children"}
    assert result["required"] == ["label"]
    assert result["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert "Node" in result["$defs"]


def test_a_root_ref_cycle_does_not_loop() -> None:
    schema = {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}
    assert_acceptable(normalize_schema(schema))


def test_the_input_schema_is_never_mutated() -> None:
    schema = {
        "$schema": "x",
        "type": ["object", "null"],
        "properties": {"a": True, "b": {"type": "string"}},
        "required": ["a", "zz"],
        "anyOf": [{"properties": {"c": {}}}],
    }
    before = copy.deepcopy(schema)
    result = normalize_schema(schema)
    result["properties"]["b"]["type"] = "changed"
    assert schema == before


def test_subclasses_of_json_types_copy_as_their_base_types_do() -> None:
    class Name(str):
        pass

    class Ordered(dict[str, Any]):
        pass

    schema = Ordered(type="object", properties=Ordered(flag={"default": True, "maximum": 3}), title=Name("t"))
    normalized = normalize_schema(schema)
    assert normalized == {
        "type": "object",
        "properties": {"flag": {"default": True, "maximum": 3}},
        "title": "t",
    }
    assert type(normalized["properties"]) is dict
    assert normalized["properties"]["flag"]["default"] is True


def test_a_cyclic_or_very_deep_schema_is_cut_instead_of_raising() -> None:
    cyclic: dict[str, Any] = {"type": "object", "properties": {}}
    cyclic["properties"]["self"] = cyclic
    cyclic["properties"]["again"] = cyclic
    assert_acceptable(normalize_schema(cyclic))

    deep: dict[str, Any] = {"type": "object"}
    for _ in range(5000):
        deep = {"type": "object", "properties": {"p": deep}}
    assert_acceptable(normalize_schema(deep))


def test_a_schema_that_shares_subobjects_exponentially_is_normalized_quickly() -> None:
    shared: dict[str, Any] = {"type": "string"}
    for _ in range(60):
        shared = {"type": "object", "properties": {"left": shared, "right": shared}}
    # Unfolded, this is 2**60 nodes: only the copy budget makes it finish. CPU time, not the
    # clock: on a busy machine the wall time also holds other processes' turns.
    started = time.process_time()
    result = normalize_schema(shared)
    assert time.process_time() - started < 5
    assert_acceptable(result)
    assert len(json.dumps(result)) < 20_000_000


class Address(BaseModel):
    street: str
    zip: str | None = None


@pytest.mark.anyio
async def test_schemas_listed_by_a_real_mcp_server_pass_through_unchanged() -> None:
    server = MCPServer("schemas")

    @server.tool()
    def ship(to: Address, copies: int = 1, note: str | None = None) -> str:
        return "ok"

    with anyio.fail_after(10):
        async with mcp.Client(server) as client:
            listed = (await client.list_tools()).tools
    schema = listed[0].input_schema
    assert "$defs" in schema
    assert normalize_schema(schema) == schema


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "properties",
                    "required",
                    "$defs",
                    "definitions",
                    "$ref",
                    "anyOf",
                    "oneOf",
                    "allOf",
                    "additionalProperties",
                    "$schema",
                    "$id",
                    "a",
                    "b",
                    "items",
                    "enum",
                    "not",
                ]
            )
            | st.text(max_size=4),
            children,
            max_size=6,
        )
    ),
    max_leaves=40,
)
schema_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["object", "string", ["object", "null"], None, 3]),
        "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), json_values, max_size=3)
        | json_values,
        "required": st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4) | json_values,
        "$ref": st.sampled_from(["#/$defs/a", "#/definitions/b", "#/$defs/", "x"]) | json_values,
        "$defs": st.dictionaries(st.sampled_from(["a", "b"]), json_values, max_size=2) | json_values,
        "anyOf": st.lists(json_values, max_size=3) | json_values,
        "allOf": st.lists(json_values, max_size=3),
        "additionalProperties": json_values,
    },
)


@settings(max_examples=300)
@given(schema=st.one_of(schema_like, json_values))
def test_any_schema_becomes_an_acceptable_one_without_mutation_and_idempotently(schema: object) -> None:
    before = copy.deepcopy(schema)
    result = normalize_schema(schema)
    assert_acceptable(result)
    assert normalize_schema(result) == result
    assert repr(schema) == repr(before)
