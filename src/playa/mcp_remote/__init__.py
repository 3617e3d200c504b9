"""``mcp-remote``: the chat owner's remote MCP servers, sealed per chat, robust to failure.

Depends only on the host's small interfaces (``playa.core``) and the shared MCP helpers
(``playa.mcp``); never on a front end or a model library.
"""

from ._callback_listener import Callbacks, PendingLogin
from ._chat import ChatServers
from ._elicit import MAX_LINK_SHOWN, MAX_TEXT, Ask, asking, credential_field
from ._extension import RemoteMcpExtension
from ._frontmatter import FrontmatterError, frontmatter_of, same_frontmatter
from ._login_relay import LoginRelay, LoginRows
from ._review import APPROVAL_LIMIT
from ._server import RemoteServer
from ._settings import FLOW_GUARD_MODES, FlowGuardMode, RemoteMcpSettings
from ._skills import LoadedSkill, Skill, SkillFile, load_skill, read_skill_file, skill_digest, skills_of
from .store import (
    KEY_FILE_NAME,
    AuditKey,
    AuditRecord,
    Decision,
    HostSecret,
    LoadResult,
    NoHostSecret,
    Policy,
    Rejected,
    ServerEntry,
    ServerStore,
    Verification,
    audit_folder,
    decision_of,
    resolve_host_secret,
    verify_log,
    verify_rows,
)
from .transport import (
    CALLBACK_PATH,
    Connection,
    ConnectionSettings,
    Connector,
    EgressMode,
    EgressPolicy,
    Endpoint,
    Resolver,
    ResultBudget,
    ResultTooLarge,
    client_metadata_document,
    list_skills,
    offers_skills,
    system_resolver,
)

__all__ = [
    "APPROVAL_LIMIT",
    "CALLBACK_PATH",
    "FLOW_GUARD_MODES",
    "KEY_FILE_NAME",
    "MAX_LINK_SHOWN",
    "MAX_TEXT",
    "Ask",
    "AuditKey",
    "AuditRecord",
    "Callbacks",
    "ChatServers",
    "Connection",
    "ConnectionSettings",
    "Connector",
    "Decision",
    "EgressMode",
    "EgressPolicy",
    "Endpoint",
    "FlowGuardMode",
    "FrontmatterError",
    "HostSecret",
    "LoadResult",
    "LoadedSkill",
    "LoginRelay",
    "LoginRows",
    "NoHostSecret",
    "PendingLogin",
    "Policy",
    "Rejected",
    "RemoteMcpExtension",
    "RemoteMcpSettings",
    "RemoteServer",
    "Resolver",
    "ResultBudget",
    "ResultTooLarge",
    "ServerEntry",
    "ServerStore",
    "Skill",
    "SkillFile",
    "Verification",
    "asking",
    "audit_folder",
    "client_metadata_document",
    "credential_field",
    "decision_of",
    "frontmatter_of",
    "list_skills",
    "load_skill",
    "offers_skills",
    "read_skill_file",
    "resolve_host_secret",
    "same_frontmatter",
    "skill_digest",
    "skills_of",
    "system_resolver",
    "verify_log",
    "verify_rows",
]
