"""The host core: chat sessions, extensions, the tool registry, commands, the UI seam, the agent and the gates.

Front ends (console, Telegram) and extensions (``mcp_remote``) use only what is named here.
"""

from ._commands import Command, CommandContext, CommandRouter, ParsedCommand, parse_command
from ._context import ContextBudget
from ._env import DEFAULT_DENIED, EnvPolicy
from ._extension import Extension, ToolResultEvent
from ._gate import GatedModel, GateLimits, gate_messages
from ._history import HISTORY_FILE, History
from ._host import DEFAULT_PROMPT, Host, HostConfig, Reply, ScopeMove, resolve_model
from ._inbound import Inbound, classify, looks_like_credential, normalize
from ._offline import offline_model
from ._outbound import OutboundSecrets, install_outbound_gate, outbound_secrets
from ._prompt import PromptSections
from ._questions import (
    QUESTION_TIMEOUT,
    Answer,
    Field,
    FieldValue,
    Question,
    answer_from_text,
    render_question,
)
from ._redact import MIN_SECRET_LENGTH, REDACTED, Redactor, auth_credential, encoded_forms
from ._registry import ToolRegistry
from ._schemas import ToolRules, Withheld, repair_schema
from ._scope import scope_folder
from ._session import ChatSession
from ._tool_search import ToolSearchLimits, rank_tools
from ._tools import Media, Tool, ToolResult
from ._turns import ModelLimits
from ._ui import UI, IncomingMessage, MessageRef, Sender
from ._workspace_tools import resolve_in_workspace, workspace_tools

__all__ = [
    "DEFAULT_DENIED",
    "DEFAULT_PROMPT",
    "HISTORY_FILE",
    "MIN_SECRET_LENGTH",
    "QUESTION_TIMEOUT",
    "REDACTED",
    "UI",
    "Answer",
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
    "ToolRegistry",
    "ToolResult",
    "ToolResultEvent",
    "ToolRules",
    "ToolSearchLimits",
    "Withheld",
    "answer_from_text",
    "auth_credential",
    "classify",
    "encoded_forms",
    "gate_messages",
    "install_outbound_gate",
    "looks_like_credential",
    "normalize",
    "offline_model",
    "outbound_secrets",
    "parse_command",
    "rank_tools",
    "render_question",
    "repair_schema",
    "resolve_in_workspace",
    "resolve_model",
    "scope_folder",
    "workspace_tools",
]
