"""What a chat's servers are, kept on disk: entries, their sealed secrets, grants and tool pins,
and the chat's audit log.

The leaf of ``mcp_remote``: imports nothing from ``transport`` or the lifecycle modules.
"""

from ._audit import (
    AuditKey,
    AuditLog,
    AuditRecord,
    Break,
    Verification,
    audit_folder,
    move_log,
    read_records,
    verify_log,
)

__all__ = [
    "AuditKey",
    "AuditLog",
    "AuditRecord",
    "Break",
    "Verification",
    "audit_folder",
    "move_log",
    "read_records",
    "verify_log",
]
