"""The host core: chat sessions, extensions, the tool registry, commands, the UI seam and the agent.

Front ends (console, Telegram) and extensions (``mcp_remote``) use only what is named here.
"""

from ._commands import Command, CommandContext, CommandRouter, ParsedCommand, parse_command
from ._env import DEFAULT_DENIED, EnvPolicy
from ._extension import Extension, ToolResultEvent
from ._history import History
from ._host import DEFAULT_PROMPT, Host, HostConfig, Reply, resolve_model
from ._inbound import Inbound, classify, looks_like_credential, normalize
from ._offline import offline_model
from ._prompt import PromptSections
from ._registry import ToolRegistry
from ._scope import scope_folder
from ._session import ChatSession
from ._tools import Media, Tool, ToolResult
from ._ui import UI, IncomingMessage, MessageRef, Sender
from ._workspace_tools import resolve_in_workspace, workspace_tools

__all__ = [
    "DEFAULT_DENIED",
    "DEFAULT_PROMPT",
    "UI",
    "ChatSession",
    "Command",
    "CommandContext",
    "CommandRouter",
    "EnvPolicy",
    "Extension",
    "History",
    "Host",
    "HostConfig",
    "Inbound",
    "IncomingMessage",
    "Media",
    "MessageRef",
    "ParsedCommand",
    "PromptSections",
    "Reply",
    "Sender",
    "Tool",
    "ToolRegistry",
    "ToolResult",
    "ToolResultEvent",
    "classify",
    "looks_like_credential",
    "normalize",
    "offline_model",
    "parse_command",
    "resolve_in_workspace",
    "resolve_model",
    "scope_folder",
    "workspace_tools",
]
