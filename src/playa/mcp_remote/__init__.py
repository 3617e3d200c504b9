"""``mcp-remote``: the chat owner's remote MCP servers, sealed per chat, robust to failure.

Depends only on the host's small interfaces (``playa.host``) and the shared MCP helpers
(``playa.mcp``); never on a front end or a model library.
"""

from ._connection import Connection, ConnectionSettings, Connector, Endpoint
from ._extension import RemoteMcpExtension
from ._redact import Redactor, encoded_forms
from ._secret import HostSecret, NoHostSecret, resolve_host_secret
from ._settings import RemoteMcpSettings
from ._store import LoadResult, Rejected, ServerEntry, ServerStore

__all__ = [
    "Connection",
    "ConnectionSettings",
    "Connector",
    "Endpoint",
    "HostSecret",
    "LoadResult",
    "NoHostSecret",
    "Redactor",
    "Rejected",
    "RemoteMcpExtension",
    "RemoteMcpSettings",
    "ServerEntry",
    "ServerStore",
    "encoded_forms",
    "resolve_host_secret",
]
