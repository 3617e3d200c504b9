"""What a tool is to the host: a name, a description, a JSON schema and an async call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Media", "Tool", "ToolResult"]


@dataclass(frozen=True, slots=True)
class Media:
    """Binary content for the model (an image or audio clip), with its MIME type."""

    data: bytes
    mime_type: str

    def __repr__(self) -> str:
        return f"Media({self.mime_type}, {len(self.data)} bytes)"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What one tool call gives the model: text, optional media, and whether it is an error.

    Extensions see and may replace it (ToolResultEvent) before the model does, so everything
    the model receives from a tool passes through here.
    """

    text: str
    is_error: bool = False
    media: tuple[Media, ...] = field(default=())

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(text=message, is_error=True)


@runtime_checkable
class Tool(Protocol):
    """A tool in a chat's registry. Its description and schema may change while it is registered."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the arguments (an object schema)."""
        ...

    async def call(self, arguments: dict[str, Any]) -> ToolResult: ...
