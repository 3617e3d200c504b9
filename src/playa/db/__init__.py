"""PostgreSQL as the home of a Playa's state (``PLAYA_DATABASE_URL``), for several processes at once.

The database holds opaque bytes where the data dir holds sealed files: sealing stays with the
code that owns each piece of state, so a reader of the database learns no credential. This
package is the foundation: the URL (its password kept out of every text), the process's pool
(asyncpg), the one seam for the driver's errors, and the versioned schema (``upgrade``).

Without ``PLAYA_DATABASE_URL`` nothing here is used and the data dir keeps everything; this
package needs the ``postgres`` extra (asyncpg).
"""

from ._admin import upgrade_database
from ._audit import AuditTable
from ._host_key import claim_host_key
from ._leases import ChatLeaseTable, Leader
from ._logins import LoginTable
from ._migrations import LOCK_KEY, Migration, Upgrade, latest_version, migrations, schema_version, upgrade
from ._open import open_storage
from ._pool import Connection, Database, PoolOptions
from ._records import RecordTable
from ._storage import DatabaseStorage, HistoryTable, ServerTable
from ._url import DEFAULT_PORT, ENV_DATABASE_URL, SSL_MODES, ConnectArguments, DatabaseUrl, database_url
from ._workspace import WorkspaceTable

__all__ = [
    "DEFAULT_PORT",
    "ENV_DATABASE_URL",
    "LOCK_KEY",
    "SSL_MODES",
    "AuditTable",
    "ChatLeaseTable",
    "ConnectArguments",
    "Connection",
    "Database",
    "DatabaseStorage",
    "DatabaseUrl",
    "HistoryTable",
    "Leader",
    "LoginTable",
    "Migration",
    "PoolOptions",
    "RecordTable",
    "ServerTable",
    "Upgrade",
    "WorkspaceTable",
    "claim_host_key",
    "database_url",
    "latest_version",
    "migrations",
    "open_storage",
    "schema_version",
    "upgrade",
    "upgrade_database",
]
