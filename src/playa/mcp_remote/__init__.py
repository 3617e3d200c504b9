"""``mcp-remote``: the chat owner's remote MCP servers, sealed per chat, robust to failure.

Depends only on the host's small interfaces (``playa.host``) and the shared MCP helpers
(``playa.mcp``); never on a front end or a model library.
"""

from ._budget import ResultBudget, ResultTooLarge
from ._connection import Connection, ConnectionSettings, Connector, Endpoint
from ._egress import EgressMode, EgressPolicy, Resolver, system_resolver
from ._extension import RemoteMcpExtension
from ._oauth import CALLBACK_PATH, Callbacks, client_metadata_document
from ._secret import HostSecret, NoHostSecret, resolve_host_secret
from ._settings import RemoteMcpSettings
from ._store import LoadResult, Rejected, ServerEntry, ServerStore

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
