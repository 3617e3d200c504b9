"""The host core: chat sessions, extensions, the tool registry, commands, the UI seam, the agent and the gates.

Two layers, and the names below say which is which:

- **The small interfaces** (sessions, the tool registry, extension hooks, prompt sections,
  commands, the UI and its questions, redaction and the outbound gate): plain Python, no model
  library. Extensions (``mcp_remote``) use only these, so another agent host can adopt them.
- **The agent** (the ``Host``, its turns, the model-bound gate, the history, the context budget,
  tool search): pydantic-ai. These names are loaded on first use, so importing the interfaces
  never loads a model library. Front ends (console, Telegram) use both.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._approvals import Approval, ToolChange, render_approval
from ._commands import (
    Command,
    CommandContext,
    CommandRouter,
    ParsedCommand,
    beside_a_question,
    parse_command,
)
from ._env import DEFAULT_DENIED, EnvPolicy
from ._extension import Extension, ToolResultEvent
from ._inbound import Inbound, classify, holds_key, looks_like_credential, mask_known_keys
from ._links import LinkCheck, check_link
from ._normalize import normalize, one_line
from ._outbound import OutboundSecrets, install_outbound_gate, outbound_secrets
from ._prompt import PromptSections
from ._questions import (
    ALWAYS,
    NOTHING_TO_ANSWER,
    NOTHING_TO_CANCEL,
    QUESTION_TIMEOUT,
    Answer,
    Field,
    FieldValue,
    Question,
    accepted,
    answer_from_text,
    cancelled_for,
    field_value,
    render_question,
    shown,
)
from ._redact import MIN_SECRET_LENGTH, REDACTED, Redactor, auth_credential, encoded_forms, is_http_token
from ._registry import ToolRegistry
from ._schemas import ToolRules, Withheld, repair_schema
from ._scope import scope_folder, session_state_dir
from ._session import ChatSession, LateResult
from ._tools import Media, Tool, ToolResult
from ._ui import UI, IncomingMessage, MessageRef, Sender
from ._workspace_tools import resolve_in_workspace, workspace_tools

if TYPE_CHECKING:
    from ._context import ContextBudget
    from ._gate import GatedModel, GateLimits, gate_messages
    from ._history import HISTORY_FILE, History
    from ._host import DEFAULT_PROMPT, Host, HostConfig, Reply, ScopeMove, resolve_model
    from ._offline import offline_model
    from ._tool_search import ToolSearchLimits, rank_tools
    from ._turns import ModelLimits

_AGENT: dict[str, str] = {
    "ContextBudget": "._context",
    "GatedModel": "._gate",
    "GateLimits": "._gate",
    "gate_messages": "._gate",
    "HISTORY_FILE": "._history",
    "History": "._history",
    "DEFAULT_PROMPT": "._host",
    "Host": "._host",
    "HostConfig": "._host",
    "Reply": "._host",
    "ScopeMove": "._host",
    "resolve_model": "._host",
    "offline_model": "._offline",
    "ToolSearchLimits": "._tool_search",
    "rank_tools": "._tool_search",
    "ModelLimits": "._turns",
}
"""The agent's names (pydantic-ai), by the module that holds each: imported on first use."""


def __getattr__(name: str) -> Any:
    module = _AGENT.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_AGENT})


__all__ = [
    "ALWAYS",
    "DEFAULT_DENIED",
    "DEFAULT_PROMPT",
    "HISTORY_FILE",
    "MIN_SECRET_LENGTH",
    "NOTHING_TO_ANSWER",
    "NOTHING_TO_CANCEL",
    "QUESTION_TIMEOUT",
    "REDACTED",
    "UI",
    "Answer",
    "Approval",
    "ChatSession",
    "Command",
    "CommandContext",
    "CommandRouter",
    "ContextBudget",
    "EnvPolicy",
    "Extension",
    "Field",
    "FieldValue",
    "GateLimits",
    "GatedModel",
    "History",
    "Host",
    "HostConfig",
    "Inbound",
    "IncomingMessage",
    "LateResult",
    "LinkCheck",
    "Media",
    "MessageRef",
    "ModelLimits",
    "OutboundSecrets",
    "ParsedCommand",
    "PromptSections",
    "Question",
    "Redactor",
    "Reply",
    "ScopeMove",
    "Sender",
    "Tool",
    "ToolChange",
    "ToolRegistry",
    "ToolResult",
    "ToolResultEvent",
    "ToolRules",
    "ToolSearchLimits",
    "Withheld",
    "accepted",
    "answer_from_text",
    "auth_credential",
    "beside_a_question",
    "cancelled_for",
    "check_link",
    "classify",
    "encoded_forms",
    "field_value",
    "gate_messages",
    "holds_key",
    "install_outbound_gate",
    "is_http_token",
    "looks_like_credential",
    "mask_known_keys",
    "normalize",
    "offline_model",
    "one_line",
    "outbound_secrets",
    "parse_command",
    "rank_tools",
    "render_approval",
    "render_question",
    "repair_schema",
    "resolve_in_workspace",
    "resolve_model",
    "scope_folder",
    "session_state_dir",
    "shown",
    "workspace_tools",
]
