"""Tool definitions the provider in use accepts: repaired where they can be, withheld where they cannot.

A provider refuses a whole request for one bad tool (OpenAI: an ``array`` without ``items``,
anywhere in the schema), so a single tool of one server would break every turn of the chat,
including turns that never use it. Every tool passes here before the model sees it: its schema
is repaired (arrays get ``items``, at any depth), then run through pydantic-ai's transformer for
the provider's profile (the same one pydantic-ai applies when it sends the request), and a tool
that still cannot be sent is withheld with a reason the owner sees in ``/mcp_list``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._tools import Tool

if TYPE_CHECKING:
    # The agent's types: the rules are part of a chat session, which loads no model library.
    from pydantic_ai._json_schema import JsonSchemaTransformer
    from pydantic_ai.models import Model
    from pydantic_ai.tools import ToolDefinition

__all__ = ["MAX_SCHEMA_BYTES", "ToolRules", "Withheld", "repair_schema"]

# What every provider Playa runs on accepts: OpenAI, Anthropic and Google take these names.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_SCHEMA_BYTES = 32 * 1024
"""A tool whose schema is larger is withheld: one tool must not take a large share of every request."""

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


@dataclass(frozen=True, slots=True)
class Withheld:
    """A tool the model does not get, and why."""

    name: str
    reason: str


def repair_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` in which every array schema, at any depth, has an ``items`` schema.

    ``{}`` (any item) is what a missing ``items`` means in JSON Schema; OpenAI insists on it being
    written. The draft-04 tuple form (``items`` as a list) becomes a union of its schemas.
    """
    return _repair(schema)


def _repair(node: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {
                name: _repair(sub) if isinstance(sub, Mapping) else sub for name, sub in value.items()
            }
        elif key in _SCHEMA_VALUES and isinstance(value, Mapping):
            out[key] = _repair(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_repair(sub) if isinstance(sub, Mapping) else sub for sub in value]
        else:
            out[key] = value
    kinds = node.get("type")
    is_array = kinds == "array" or (isinstance(kinds, list) and "array" in kinds)
    items = out.get("items")
    if is_array and not isinstance(items, dict):
        if isinstance(items, list) and (tuple_items := [_repair(s) for s in items if isinstance(s, Mapping)]):
            out["items"] = {"anyOf": tuple_items}
        else:
            out["items"] = {}
    return out


class ToolRules:
    """Turns a chat's tools into definitions for the model in use, or says why one is withheld.

    The work is cached per tool and redone only when its description or schema object changes,
    since it runs for every tool at every model step. Whether a tool is withheld is answered
    without pydantic-ai (``/mcp_list`` asks it); only ``definition`` makes the agent's type.
    """

    def __init__(self, transformer: type[JsonSchemaTransformer] | None = None) -> None:
        self._transformer = transformer
        self._cache: dict[str, _Checked] = {}

    @classmethod
    def for_model(cls, model: Model) -> ToolRules:
        transformer = model.profile.get("json_schema_transformer")
        return cls(transformer if isinstance(transformer, type) else None)

    def definition(self, tool: Tool) -> ToolDefinition | Withheld:
        """What the model gets for ``tool``: its definition, or the reason it gets none."""
        checked = self._checked(tool)
        if isinstance(checked.verdict, Withheld):
            return checked.verdict
        if checked.definition is None:
            # Imported here, where the agent asks for it: the session's module loads no model library.
            from pydantic_ai.tools import ToolDefinition

            # Not cut here: the model-bound gate cuts descriptions (to OpenAI's and Google's
            # 1,024 characters) once they are redacted.
            checked.definition = ToolDefinition(
                name=tool.name, description=checked.description, parameters_json_schema=checked.verdict
            )
        return checked.definition

    def withheld(self, tool: Tool) -> str | None:
        """Why ``tool`` is withheld from the model, or None when it is not."""
        verdict = self._checked(tool).verdict
        return verdict.reason if isinstance(verdict, Withheld) else None

    def _checked(self, tool: Tool) -> _Checked:
        description, parameters = tool.description, tool.parameters
        cached = self._cache.get(tool.name)
        if cached is not None and cached.description == description and cached.parameters is parameters:
            return cached
        checked = self._cache[tool.name] = _Checked(
            description, parameters, self._schema(tool.name, parameters)
        )
        return checked

    def _schema(self, name: str, parameters: Mapping[str, Any]) -> dict[str, Any] | Withheld:
        """The schema to send for the tool, or why it cannot be sent."""
        if not _NAME.fullmatch(name):
            return Withheld(name, "its name is not 1 to 64 letters, digits, _ or -")
        schema = repair_schema(parameters)
        if schema.get("type") != "object":
            return Withheld(name, "its input schema is not an object schema")
        size = len(json.dumps(schema, ensure_ascii=False).encode())
        if size > MAX_SCHEMA_BYTES:
            return Withheld(
                name,
                f"its input schema is {size // 1024} KB, more than the {MAX_SCHEMA_BYTES // 1024} KB allowed",
            )
        if self._transformer is not None:
            try:
                self._transformer(schema, strict=None).walk()
            except (
                Exception
            ) as exc:  # boundary: whatever the provider's rules refuse withholds this tool only
                return Withheld(
                    name, f"the model's provider cannot take its input schema ({type(exc).__name__})"
                )
        return schema


@dataclass(slots=True)
class _Checked:
    """One tool as last checked: the text and schema object checked, the verdict, its definition."""

    description: str
    parameters: Mapping[str, Any]
    verdict: dict[str, Any] | Withheld
    definition: ToolDefinition | None = None
