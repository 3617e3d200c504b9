"""One registry tool per exposed remote tool name, re-bound as its server comes and goes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core import ChatSession, ToolResult
from ..exceptions import ToolUnbound

__all__ = ["Binding", "RemoteMcpTool", "ToolSlots"]

Caller = Callable[[str, dict[str, Any]], Awaitable[ToolResult]]
"""Calls the server's tool by its own (remote) name."""


@dataclass(frozen=True, slots=True)
class Binding:
    """What a remote tool is bound to now: the server's name for it, its text and its caller."""

    server: str
    remote_name: str
    description: str
    parameters: Mapping[str, Any]
    call: Caller


class RemoteMcpTool:
    """A chat's tool backed by a remote MCP server's tool.

    The registry never removes a tool, so this object outlives connections: a reconnect or a
    re-add binds it again (description, schema, connection), and a removal unbinds it, after
    which calling it is a clear error until it is bound again.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._binding: Binding | None = None

    def __repr__(self) -> str:
        state = f"bound to {self._binding.server}" if self._binding else "unbound"
        return f"<RemoteMcpTool {self._name} {state}>"

    @property
    def name(self) -> str:
        return self._name

    @property
    def binding(self) -> Binding | None:
        return self._binding

    @property
    def description(self) -> str:
        if self._binding is None:
            return "(unavailable: its server was removed)"
        return self._binding.description

    @property
    def parameters(self) -> Mapping[str, Any]:
        if self._binding is None:
            return {"type": "object", "properties": {}}
        return self._binding.parameters

    def bind(self, binding: Binding) -> None:
        self._binding = binding

    def unbind(self) -> None:
        self._binding = None

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        binding = self._binding
        if binding is None:
            raise ToolUnbound(self._name)
        return await binding.call(binding.remote_name, arguments)


class ToolSlots:
    """A chat's registry tools for remote tools, by exposed name: made once, bound as servers come and go."""

    def __init__(self, session: ChatSession) -> None:
        self._session = session
        self._tools: dict[str, RemoteMcpTool] = {}

    def get(self, exposed: str) -> RemoteMcpTool | None:
        return self._tools.get(exposed)

    def bind(self, bindings: Mapping[str, Binding], before: list[str]) -> list[str]:
        """Bind and offer ``bindings`` (by exposed name); unbind those of ``before`` that are not among them."""
        for exposed, binding in bindings.items():
            tool = self._tools.get(exposed)
            if tool is None:
                tool = self._tools[exposed] = RemoteMcpTool(exposed)
                self._session.tools.register(tool, active=False)
            tool.bind(binding)
            self._session.tools.activate(exposed)
        self.unbind(set(before) - bindings.keys())
        return list(bindings)

    def unbind(self, names: Iterable[str]) -> None:
        """Take the tools from the model and from their server: calling one is a clear error."""
        for exposed in names:
            self._tools[exposed].unbind()
            self._session.tools.deactivate(exposed)

    def hide(self, names: Iterable[str]) -> None:
        """Take the tools from the model; they stay bound until their server binds them again."""
        for exposed in names:
            self._session.tools.deactivate(exposed)

    def withheld(self, names: Iterable[str]) -> list[tuple[str, str]]:
        """Of these tools, the ones the model in use cannot take, with the reason for each."""
        found: list[tuple[str, str]] = []
        for exposed in names:
            reason = self._session.tool_rules.withheld(self._tools[exposed])
            if reason is not None:
                found.append((exposed, reason))
        return found
