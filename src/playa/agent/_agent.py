"""The model loop: pydantic-ai over a chat's registry, with every tool result passed to the hooks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pydantic_ai
from pydantic_ai import Agent
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import BinaryContent
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from ..core import ChatSession, ToolResult, Withheld
from ._context import DEFAULT_CONTEXT_TOKENS, definition_tokens
from ._tool_search import ToolSearchLimits, tool_search

__all__ = ["SessionToolset", "ToolCaller", "build_agent", "model_content"]

ToolCaller = Callable[[ChatSession, str, dict[str, Any]], Awaitable[ToolResult]]
"""Runs one tool call of a chat end to end (registry lookup, call, hooks)."""

# Arguments are checked by the tool itself (a remote server validates its own schema), so the
# model loop only insists on a JSON object.
_ANY_OBJECT = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))


@dataclass(eq=False)
class SessionToolset(AbstractToolset[None]):
    """The tools the model sees: the chat's active tools, read afresh at every model step."""

    session: ChatSession
    caller: ToolCaller
    search: ToolSearchLimits | None = field(default_factory=ToolSearchLimits)
    """None: every tool is offered whole, however many there are."""
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    """The budget the tool definitions' share (``search.max_share``) is measured against."""

    @property
    def id(self) -> str:
        return "playa-session"

    def definitions(self) -> list[ToolDefinition]:
        """The definitions the model is offered, sorted by name; past the search budget, all but
        the chat's core tools are deferred (found through ``search_tools``).

        Sorted: the tool list is part of the prompt's cacheable prefix, and must not move when a
        server reconnects and its tools are activated in another order.
        """
        definitions: list[ToolDefinition] = []
        for tool in sorted(self.session.tools.active(), key=lambda tool: tool.name):
            definition = self.session.tool_rules.definition(tool)
            if not isinstance(definition, Withheld):
                definitions.append(definition)
        core = self.session.core_tools | self.session.kept_whole
        others = [d for d in definitions if d.name not in core]
        if self.search is None or not others:
            return definitions
        if len(others) > self.search.max_tools or (
            definition_tokens(others) > self.search.max_share * self.context_tokens
        ):
            return [d if d.name in core else replace(d, defer_loading=True) for d in definitions]
        return definitions

    async def get_tools(self, ctx: RunContext[None]) -> dict[str, ToolsetTool[None]]:
        return {
            definition.name: ToolsetTool(
                toolset=self, tool_def=definition, max_retries=1, args_validator=_ANY_OBJECT
            )
            for definition in self.definitions()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[None], tool: ToolsetTool[None]
    ) -> Any:
        result = await self.caller(self.session, name, tool_args)
        if result.is_error:
            raise ToolFailed(result.text)
        return model_content(result)


def model_content(result: ToolResult) -> str | list[str | BinaryContent]:
    """A tool result as pydantic-ai passes it on to the model."""
    if not result.media:
        return result.text
    return [result.text, *(BinaryContent(data=m.data, media_type=m.mime_type) for m in result.media)]


def build_agent(search: ToolSearchLimits | None = None) -> Agent[None, str]:
    """One agent for the host; each turn passes its chat's gated model, toolset and instructions.

    The agent has no model of its own, so a run that is not given the gated model fails.
    """
    # The host owns its output: pydantic-ai's first-run banner would land in the chat window.
    pydantic_ai.BANNER_ENABLED = False
    return Agent(
        None,
        output_type=str,
        defer_model_check=True,
        capabilities=[tool_search(search or ToolSearchLimits())],
    )
