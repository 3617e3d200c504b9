"""The per-chat tool registry: tools are added at any time, never removed, and switched on or off."""

from __future__ import annotations

from ..exceptions import ToolInactive, ToolNotFound
from ._tools import Tool

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """The tools of one chat session.

    A tool, once registered, stays: whoever holds a reference to it (a running model step, a
    history that names it) keeps a valid name. Deactivating it hides it from the model at its
    next step and makes calls fail with a clear error.
    """

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._active: dict[str, None] = {}  # insertion-ordered set

    def register(self, tool: Tool, *, active: bool = True) -> None:
        """Add a tool. Registering the same object again only (re)applies ``active``."""
        existing = self._tools.get(tool.name)
        if existing is not None and existing is not tool:
            raise ValueError(f"a different tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        if active:
            self.activate(tool.name)
        else:
            self._active.pop(tool.name, None)

    def activate(self, name: str) -> None:
        if name not in self._tools:
            raise ToolNotFound(name)
        self._active[name] = None

    def deactivate(self, name: str) -> None:
        if name not in self._tools:
            raise ToolNotFound(name)
        self._active.pop(name, None)

    def is_active(self, name: str) -> bool:
        return name in self._active

    def get(self, name: str) -> Tool:
        """The tool of that name, active or not."""
        try:
            return self._tools[name]
        except KeyError:
            raise ToolNotFound(name) from None

    def callable(self, name: str) -> Tool:
        """The tool of that name if the model may call it now."""
        tool = self.get(name)
        if name not in self._active:
            raise ToolInactive(name)
        return tool

    def active(self) -> list[Tool]:
        """The active tools, in the order they were first activated."""
        return [self._tools[name] for name in self._active]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)
