"""A chat session: one chat's scope, owner, workspace, tools and prompt sections."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ._prompt import PromptSections
from ._registry import ToolRegistry
from ._schemas import ToolRules
from ._storage import Storage
from ._tools import ToolResult
from ._ui import UI, Sender
from ._workspace import FolderWorkspace, Workspace

__all__ = ["ChatSession", "LateResult"]


@dataclass(frozen=True, slots=True)
class LateResult:
    """A tool's result that came after its turn ended: a task the server went on running, say.

    ``ChatSession.deliver_late`` shows it in the chat through ``ui`` (the front end of the
    message whose turn called the tool) and keeps it in the history, so the agent learns it on
    its next turn.
    """

    tool_name: str
    arguments: dict[str, Any]
    result: ToolResult
    ui: UI
    note: str
    """What it is, in a line ("The task of …, still running when its turn ended, has finished."):
    shown first, to the chat and the model."""

    def __repr__(self) -> str:
        return f"LateResult({self.tool_name!r}, error={self.result.is_error})"


@dataclass(eq=False)
class ChatSession:
    """Everything one chat owns that extensions and front ends see. Chats never share any of it.

    The chat's conversation (its history) is the agent's: ``Host.history(session)``.
    """

    scope: str
    """``console:<name>`` or ``telegram:<chat_id>``: bound into everything the chat stores."""
    owner: str
    """The owner's identity as the front end knows it."""
    workspace: Path
    """The chat's folder in the data dir: the agent's files when the data dir keeps them (then
    ``files`` is this folder), and the host's own files (``.volcanic/``), which the agent never reaches."""
    state_dir: Path | None = None
    """The chat's private folder outside the workspace (``<data_dir>/sessions/<scope folder>``),
    where the host and extensions keep what the agent must not reach; None when the host has none."""
    storage: Storage | None = None
    """Where the chat's servers and history are kept instead of the data dir (``PLAYA_DATABASE_URL``);
    None: the data dir. Chosen by the host at start, the same for every chat."""
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    prompt: PromptSections = field(default_factory=PromptSections)
    core_tools: frozenset[str] = frozenset()
    """The host's own tools (the workspace's): always offered whole, also when the others are
    offered through a tool search."""
    kept_whole: set[str] = field(default_factory=set)
    """Tools an extension offers as the chat's own (a server's resources and skills are reached
    through them): like ``core_tools``, offered whole and not counted toward a tool search."""
    tool_rules: ToolRules = field(default_factory=ToolRules)
    """Which tools the model in use can take, and how they are sent to it."""
    turn_lock: anyio.Lock = field(default_factory=anyio.Lock)
    """Held for a whole turn, so one chat's turns run one at a time."""
    last_used: float = field(default_factory=anyio.current_time)
    """When a message for the chat last arrived or was answered (the event loop's clock)."""
    busy: int = 0
    """Messages being handled now; a busy session is never evicted."""
    group: bool = False
    """Whether the chat has members besides its owner (a Telegram group); set by the front end."""
    turn_ui: UI | None = None
    """While a turn runs, the front end of the message that started it: a server's questions
    during the turn are asked of that message's sender, and of nobody else."""
    turn_sender: Sender | None = None
    """While a turn runs, who sent the message that started it (also for a member's turn)."""
    redact: Callable[[str], str] | None = None
    """Removes every credential the chat knows (the host's, and every extension's) from text on its
    way out of the host; set by the host. Extensions use it for what they show the chat directly."""
    deliver_late: Callable[[LateResult], Awaitable[None]] | None = None
    """Hands the host a result that came after its turn (see ``LateResult``); set by the host."""
    closed: anyio.Event = field(default_factory=anyio.Event)
    """Set once the host closed the session (idle, or shutdown); the host reopens the chat on its next message."""
    files: Workspace = field(init=False, repr=False)
    """The agent's files: every writer of them goes through it (the workspace tools, a file a
    person sends, a resource a server returns). The ``workspace`` folder unless the host sets
    another (the database's rows, ``open_workspace``) before the session is used."""

    def __post_init__(self) -> None:
        self.files = FolderWorkspace(self.workspace)

    def __repr__(self) -> str:
        return f"ChatSession({self.scope!r})"
