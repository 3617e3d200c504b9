"""The core: what extensions and front ends see of a chat host, with no model library.

Chat sessions, the tool registry, extension hooks, prompt sections, commands, the UI seam and its
questions, environment policy, scopes, tool schemas, and (in :mod:`playa.core.secrets`) the rules
for secrets: the credential classifier, the redactor and the outbound gate for logs. Extensions
(``playa.mcp_remote``) use only these, so another agent host can adopt them; the agent that
drives a model (``playa.agent``) stands on them too.
"""

from __future__ import annotations

from ._approvals import Approval, ToolChange, render_approval
from ._attachments import (
    ATTACHMENT_FOLDER,
    MAX_ATTACHMENT,
    attachment_note,
    attachment_secret,
    safe_file_name,
    save_attachment,
)
from ._bounds import check_at_least
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
from ._inbound import Inbound, classify, oauth_redirect
from ._links import LinkCheck, check_link
from ._locks import KeyedLocks
from ._metrics import Gauge, Metrics, exposition, process_metrics
from ._normalize import normalize, one_line
from ._panel import Panel, PanelAction, PanelRow, render_panel
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
from ._registry import ToolRegistry
from ._schemas import ToolRules, Withheld, repair_schema
from ._scope import folder_scope, scope_folder, session_state_dir
from ._session import ChatSession, LateResult
from ._storage import (
    AuditRows,
    ChatLeases,
    ChatRows,
    HistoryRows,
    Leadership,
    LeaseTaken,
    Lost,
    PendingLogins,
    RecordRows,
    ServerRow,
    ServerRows,
    Storage,
    StoredServers,
    WorkspaceRows,
)
from ._tools import Media, Tool, ToolResult
from ._ui import UI, Attachment, IncomingMessage, MessageRef, Sender
from ._workspace import FolderWorkspace, Workspace, open_workspace
from ._workspace_rows import RowWorkspace, workspace_row_tools
from ._workspace_tools import HOST_FOLDER, over_quota, resolve_in_workspace, workspace_path, workspace_tools
from .secrets import (
    MIN_SECRET_LENGTH,
    REDACTED,
    OutboundSecrets,
    Redactor,
    auth_credential,
    encoded_forms,
    holds_key,
    install_outbound_gate,
    is_http_token,
    looks_like_credential,
    mask_known_keys,
    outbound_secrets,
)

__all__ = [
    "ALWAYS",
    "ATTACHMENT_FOLDER",
    "DEFAULT_DENIED",
    "HOST_FOLDER",
    "MAX_ATTACHMENT",
    "MIN_SECRET_LENGTH",
    "NOTHING_TO_ANSWER",
    "NOTHING_TO_CANCEL",
    "QUESTION_TIMEOUT",
    "REDACTED",
    "UI",
    "Answer",
    "Approval",
    "Attachment",
    "AuditRows",
    "ChatLeases",
    "ChatRows",
    "ChatSession",
    "Command",
    "CommandContext",
    "CommandRouter",
    "EnvPolicy",
    "Extension",
    "Field",
    "FieldValue",
    "FolderWorkspace",
    "Gauge",
    "HistoryRows",
    "Inbound",
    "IncomingMessage",
    "KeyedLocks",
    "LateResult",
    "Leadership",
    "LeaseTaken",
    "LinkCheck",
    "Lost",
    "Media",
    "MessageRef",
    "Metrics",
    "OutboundSecrets",
    "Panel",
    "PanelAction",
    "PanelRow",
    "ParsedCommand",
    "PendingLogins",
    "PromptSections",
    "Question",
    "RecordRows",
    "Redactor",
    "RowWorkspace",
    "Sender",
    "ServerRow",
    "ServerRows",
    "Storage",
    "StoredServers",
    "Tool",
    "ToolChange",
    "ToolRegistry",
    "ToolResult",
    "ToolResultEvent",
    "ToolRules",
    "Withheld",
    "Workspace",
    "WorkspaceRows",
    "accepted",
    "answer_from_text",
    "attachment_note",
    "attachment_secret",
    "auth_credential",
    "beside_a_question",
    "cancelled_for",
    "check_at_least",
    "check_link",
    "classify",
    "encoded_forms",
    "exposition",
    "field_value",
    "folder_scope",
    "holds_key",
    "install_outbound_gate",
    "is_http_token",
    "looks_like_credential",
    "mask_known_keys",
    "normalize",
    "oauth_redirect",
    "one_line",
    "open_workspace",
    "outbound_secrets",
    "over_quota",
    "parse_command",
    "process_metrics",
    "render_approval",
    "render_panel",
    "render_question",
    "repair_schema",
    "resolve_in_workspace",
    "safe_file_name",
    "save_attachment",
    "scope_folder",
    "session_state_dir",
    "shown",
    "workspace_path",
    "workspace_row_tools",
    "workspace_tools",
]
