"""Turn any MCP ``inputSchema`` into an object schema that the model providers accept.

A remote server is free to send a schema that is missing, not an object, rooted in a ``$ref``
or a combinator, or inconsistent (``required`` naming no property). OpenAI refuses a function
whose parameters are not ``type: "object"`` or that has ``anyOf``/``oneOf``/``allOf``/``enum``/
``not`` at the top level; Anthropic and Google want an object root too. One bad tool must not
break the whole turn, so the schema is repaired here instead of rejected.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["normalize_schema"]

# Each level of schema nesting is two levels of JSON (``properties`` -> name -> schema), so
# this leaves room for any real schema while keeping recursion far from Python's limit.
_MAX_DEPTH = 200
_MAX_NODES = 200_000

_DEFS_KEYS = ("$defs", "definitions")
# Dropped from the root: ``$schema`` names a draft some providers refuse, ``$id`` would change
# how ``$ref`` resolves once the schema is embedded in a provider's request.
_DROPPED_ROOT_KEYS = frozenset({"$schema", "$id"})
_ROOT_COMBINATORS = ("allOf", "anyOf", "oneOf")
_ROOT_FORBIDDEN = frozenset({"allOf", "anyOf", "oneOf", "not", "enum", "const", "$ref"})

_KEPT_CHARS: Final = 8 * 1024 * 1024
"""Characters of normalized schemas kept by key, in all (the oldest go first)."""
_KEPT_LARGEST: Final = 256 * 1024


class _Kept:
    """Normalized schemas by key, as JSON; safe to use from any thread."""

    def __init__(self) -> None:
        self._schemas: dict[bytes, str] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, key: bytes) -> str | None:
        return self._schemas.get(key)

    def keep(self, key: bytes, schema: dict[str, Any]) -> None:
        try:
            encoded = json.dumps(schema, ensure_ascii=False, allow_nan=False)
        except ValueError:
            return  # an integer too long to write as text (Python's 4,300 digits): walked each time
        if len(encoded) > _KEPT_LARGEST:
            return
        with self._lock:
            if key in self._schemas:
                return
            while self._schemas and self._chars + len(encoded) > _KEPT_CHARS:
                self._chars -= len(self._schemas.pop(next(iter(self._schemas))))
            self._schemas[key] = encoded
            self._chars += len(encoded)


_kept = _Kept()


def normalize_schema(schema: object, *, key: bytes | None = None) -> dict[str, Any]:
    """An object-root JSON schema for a tool's arguments, built from whatever the server sent.

    The result is a fresh JSON value (the input is never mutated), has ``type: "object"`` and
    a ``properties`` dict, and its ``required`` (when present) lists only existing properties.
    Never raises.

    ``key``: a digest of the JSON that ``schema`` was parsed from (a tool definition's, say).
    The result is kept by it as JSON, and a later call with the same key parses it again, in C:
    every chat that binds one server's tools gets its own copy of each schema without walking
    the server's schema again.
    """
    if key is not None and (known := _kept.get(key)) is not None:
        parsed: dict[str, Any] = json.loads(known)
        return parsed
    result = _normalized(schema)
    if key is not None:
        _kept.keep(key, result)
    return result


def _normalized(schema: object) -> dict[str, Any]:
    copied = _JsonCopier().copy(schema)
    root: dict[str, Any] = copied if isinstance(copied, dict) else {}
    root = _inline_root_ref(root)

    properties: dict[str, Any] = {}
    required: list[str] = []
    _merge_object(properties, required, root)
    _merge_combinators(properties, required, root)

    result: dict[str, Any] = {
        key: value
        for key, value in root.items()
        if key not in _DROPPED_ROOT_KEYS and key not in _ROOT_FORBIDDEN
    }
    result["type"] = "object"
    result["properties"] = properties
    present = [name for name in dict.fromkeys(required) if name in properties]
    if present:
        result["required"] = present
    else:
        result.pop("required", None)
    for key in _DEFS_KEYS:
        if key in result and not isinstance(result[key], dict):
            del result[key]
    if "additionalProperties" in result and not isinstance(result["additionalProperties"], bool | dict):
        del result["additionalProperties"]
    return result


class _JsonCopier:
    """Deep-copies a value keeping only JSON values; anything else is dropped or replaced.

    Nesting beyond ``_MAX_DEPTH``, a cycle, or nodes beyond ``_MAX_NODES`` become ``{}``, the
    schema that accepts anything. The node budget matters for objects built in process: a
    value that shares sub-objects can be exponentially larger unfolded than it is in memory.
    """

    def __init__(self) -> None:
        self._nodes = 0
        self._path: set[int] = set()

    def copy(self, value: object, depth: int = 0) -> Any:
        self._nodes += 1
        kind = type(value)
        if kind is str or kind is bool or kind is int or value is None:
            # Most nodes, answered before the checks against unions and the ``Mapping`` ABC (the
            # bulk of a schema's normalization, which every chat binding a server's tools repeats).
            return value
        if isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if not isinstance(value, Mapping | list | tuple):
            return None
        if depth >= _MAX_DEPTH or self._nodes > _MAX_NODES or id(value) in self._path:
            return {}
        self._path.add(id(value))
        try:
            if isinstance(value, Mapping):
                return {
                    key: self.copy(item, depth + 1) for key, item in value.items() if isinstance(key, str)
                }
            return [self.copy(item, depth + 1) for item in value]
        finally:
            self._path.discard(id(value))


def _inline_root_ref(root: dict[str, Any]) -> dict[str, Any]:
    """Replace a root ``{"$ref": "#/$defs/X"}`` by the definition it points at.

    Pydantic emits this shape for recursive models; providers refuse a root without ``type``.
    """
    seen: set[str] = set()
    while isinstance(ref := root.get("$ref"), str) and ref not in seen:
        seen.add(ref)
        target = _local_definition(root, ref)
        if target is None:
            break
        merged = {key: value for key, value in root.items() if key != "$ref"}
        for key, value in target.items():
            merged.setdefault(key, value)
        root = merged
    return root


def _local_definition(root: dict[str, Any], ref: str) -> dict[str, Any] | None:
    for key in _DEFS_KEYS:
        prefix = f"#/{key}/"
        defs = root.get(key)
        if ref.startswith(prefix) and isinstance(defs, dict):
            target = defs.get(ref[len(prefix) :])
            return target if isinstance(target, dict) else None
    return None


def _merge_object(properties: dict[str, Any], required: list[str], schema: dict[str, Any]) -> None:
    """Add the properties and required names of one object schema."""
    raw = schema.get("properties")
    if isinstance(raw, dict):
        for name, prop in raw.items():
            if prop is False:
                # A property that must never be present: the model should not see it at all.
                continue
            # A non-schema value is a server bug; "anything" keeps the property usable.
            properties.setdefault(name, prop if isinstance(prop, dict) else {})
    required.extend(_required_names(schema.get("required")))


def _required_names(raw: object) -> list[str]:
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list):
        return [name for name in raw if isinstance(name, str)]
    return []


def _merge_combinators(properties: dict[str, Any], required: list[str], root: dict[str, Any]) -> None:
    """Fold root-level ``allOf``/``anyOf``/``oneOf`` branches into the root object.

    The properties of every branch are offered. A name is required when ``allOf`` requires it
    in any branch, or ``anyOf``/``oneOf`` require it in every branch, since only then is it
    required whichever branch the arguments match.
    """
    for key in _ROOT_COMBINATORS:
        branches = root.get(key)
        if not isinstance(branches, list):
            continue
        objects = [branch for branch in branches if isinstance(branch, dict)]
        branch_required: list[list[str]] = []
        for branch in objects:
            branch_names: list[str] = []
            _merge_object(properties, branch_names, branch)
            branch_required.append(branch_names)
        if key == "allOf":
            for names in branch_required:
                required.extend(names)
        elif branch_required and len(objects) == len(branches):
            common = set(branch_required[0]).intersection(*branch_required[1:])
            required.extend(name for name in branch_required[0] if name in common)
