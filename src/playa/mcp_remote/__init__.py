"""``mcp-remote``: the chat owner's remote MCP servers, sealed per chat, robust to failure.

Depends only on the host's small interfaces (``playa.host``) and the shared MCP helpers
(``playa.mcp``); never on a front end or a model library.
"""

from ._extension import RemoteMcpExtension
from ._settings import FLOW_GUARD_MODES, FlowGuardMode, RemoteMcpSettings
from .store import AuditKey, AuditRecord, Verification, audit_folder, verify_log
from .store._policy import Decision, Policy, decision_of
from .store._secret import KEY_FILE_NAME, HostSecret, NoHostSecret, resolve_host_secret
from .store._store import LoadResult, Rejected, ServerEntry, ServerStore
from .transport._budget import ResultBudget, ResultTooLarge
from .transport._connection import Connection, ConnectionSettings, Connector, Endpoint
from .transport._egress import EgressMode, EgressPolicy, Resolver, system_resolver
from .transport._oauth import CALLBACK_PATH, Callbacks, client_metadata_document

__all__ = [
    "CALLBACK_PATH",
    "FLOW_GUARD_MODES",
    "KEY_FILE_NAME",
    "AuditKey",
    "AuditRecord",
    "Callbacks",
    "Connection",
    "ConnectionSettings",
    "Connector",
    "Decision",
    "EgressMode",
    "EgressPolicy",
    "Endpoint",
    "FlowGuardMode",
    "HostSecret",
    "LoadResult",
    "NoHostSecret",
    "Policy",
    "Rejected",
    "RemoteMcpExtension",
    "RemoteMcpSettings",
    "Resolver",
    "ResultBudget",
    "ResultTooLarge",
    "ServerEntry",
    "ServerStore",
    "Verification",
    "audit_folder",
    "client_metadata_document",
    "decision_of",
    "resolve_host_secret",
    "system_resolver",
    "verify_log",
]
