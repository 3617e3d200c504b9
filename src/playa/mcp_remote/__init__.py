"""``mcp-remote``: the chat owner's remote MCP servers, sealed per chat, robust to failure.

Depends only on the host's small interfaces (``playa.host``) and the shared MCP helpers
(``playa.mcp``); never on a front end or a model library.
"""

from ._extension import RemoteMcpExtension
from ._settings import RemoteMcpSettings
from .store._secret import HostSecret, NoHostSecret, resolve_host_secret
from .store._store import LoadResult, Rejected, ServerEntry, ServerStore
from .transport._budget import ResultBudget, ResultTooLarge
from .transport._connection import Connection, ConnectionSettings, Connector, Endpoint
from .transport._egress import EgressMode, EgressPolicy, Resolver, system_resolver
from .transport._oauth import CALLBACK_PATH, Callbacks, client_metadata_document

__all__ = [
    "CALLBACK_PATH",
    "Callbacks",
    "Connection",
    "ConnectionSettings",
    "Connector",
    "EgressMode",
    "EgressPolicy",
    "Endpoint",
    "HostSecret",
    "LoadResult",
    "NoHostSecret",
    "Rejected",
    "RemoteMcpExtension",
    "RemoteMcpSettings",
    "Resolver",
    "ResultBudget",
    "ResultTooLarge",
    "ServerEntry",
    "ServerStore",
    "client_metadata_document",
    "resolve_host_secret",
    "system_resolver",
]
