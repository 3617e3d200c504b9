"""The agent: the pydantic-ai side of a chat host.

The :class:`Host` opens, evicts, moves and closes chat sessions and handles each message; a turn
runs the model through the gate (:class:`GatedModel`) over the chat's history, within the context
budget, with tool search when a chat has many tools, or the offline model when none is set.
Front ends (console, Telegram) drive it; it stands on :mod:`playa.core`.
"""

from ._config import DEFAULT_PROMPT, HostConfig, resolve_model
from ._context import ContextBudget
from ._gate import GatedModel, GateLimits, gate_messages
from ._history import HISTORY_FILE, History
from ._host import Host, Reply
from ._offline import offline_model
from ._sessions import ScopeMove
from ._stream import LiveReply, ReplyStream
from ._tool_search import ToolSearchLimits, rank_tools
from ._turns import ModelLimits

__all__ = [
    "DEFAULT_PROMPT",
    "HISTORY_FILE",
    "ContextBudget",
    "GateLimits",
    "GatedModel",
    "History",
    "Host",
    "HostConfig",
    "LiveReply",
    "ModelLimits",
    "Reply",
    "ReplyStream",
    "ScopeMove",
    "ToolSearchLimits",
    "gate_messages",
    "offline_model",
    "rank_tools",
    "resolve_model",
]
