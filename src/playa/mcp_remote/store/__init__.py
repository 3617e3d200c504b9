"""What a chat's servers are, kept on disk: entries, their sealed secrets, grants and tool pins,
and the chat's audit log.

The leaf of ``mcp_remote``: imports nothing from ``transport`` or the lifecycle modules. What
the rest of ``mcp_remote`` needs of it is named by protocols (``ServerStorage``, ``EntryWriter``,
``AuditTrail``); ``FileServers`` (over ``ServerStore``, the sealed file), ``RowServers`` (over
a database's rows) and ``AuditLog`` are the backends that fill them.
"""

from ._audit import AuditLog, move_log
from ._audit_chain import AuditKey, AuditRecord, FieldValue
from ._audit_file import audit_folder, read_records, replace_log, verify_log
from ._audit_rows import log_rows, move_rows, verify_rows
from ._audit_verify import Break, Verification
from ._entry import AuthKind, ServerEntry, TransportChoice
from ._file_servers import FileServers
from ._grant import CLIENT_CREDENTIALS, OAuthGrant, client_key_pem, resource_of, signing_algorithm
from ._identity_provider import ENTERPRISE_GRANT, IdentityProvider
from ._pin_views import (
    HIDDEN_NOTE,
    SAME_NOTE,
    approval_digest,
    change_of,
    instructions_change,
    same_definitions,
    shown_name,
    shown_names,
    view_digest,
    without_format,
)
from ._pins import INSTRUCTIONS_KEPT, Pins, digest_of, field_digests, pending_digest
from ._policy import DECISIONS, READ_ONLY_MARKS, Decision, Policy, decision_of, read_only_of
from ._prompt_digest import PromptPins, prompt_definition, prompt_digest
from ._prompt_views import prompt_change
from ._row_servers import RowMemory, RowServers
from ._seal import (
    Envelope,
    MalformedSeal,
    SealBroken,
    Sealer,
    SealError,
    UnknownSealVersion,
    WrongKey,
    canonical_json,
)
from ._seams import AuditTrail, EntryWriter, ServerStorage
from ._secret import KEY_FILE_NAME, HostSecret, NoHostSecret, resolve_host_secret
from ._server_file import MAX_FILE_BYTES, store_path
from ._skill_pins import SkillPins
from ._skill_views import skill_change, skill_definition
from ._store import LoadResult, Rejected, Saved, ServerStore, UnopenedFile
from ._url import mask_url

__all__ = [
    "CLIENT_CREDENTIALS",
    "DECISIONS",
    "ENTERPRISE_GRANT",
    "HIDDEN_NOTE",
    "INSTRUCTIONS_KEPT",
    "KEY_FILE_NAME",
    "MAX_FILE_BYTES",
    "READ_ONLY_MARKS",
    "SAME_NOTE",
    "AuditKey",
    "AuditLog",
    "AuditRecord",
    "AuditTrail",
    "AuthKind",
    "Break",
    "Decision",
    "EntryWriter",
    "Envelope",
    "FieldValue",
    "FileServers",
    "HostSecret",
    "IdentityProvider",
    "LoadResult",
    "MalformedSeal",
    "NoHostSecret",
    "OAuthGrant",
    "Pins",
    "Policy",
    "PromptPins",
    "Rejected",
    "RowMemory",
    "RowServers",
    "Saved",
    "SealBroken",
    "SealError",
    "Sealer",
    "ServerEntry",
    "ServerStorage",
    "ServerStore",
    "SkillPins",
    "TransportChoice",
    "UnknownSealVersion",
    "UnopenedFile",
    "Verification",
    "WrongKey",
    "approval_digest",
    "audit_folder",
    "canonical_json",
    "change_of",
    "client_key_pem",
    "decision_of",
    "digest_of",
    "field_digests",
    "instructions_change",
    "log_rows",
    "mask_url",
    "move_log",
    "move_rows",
    "pending_digest",
    "prompt_change",
    "prompt_definition",
    "prompt_digest",
    "read_only_of",
    "read_records",
    "replace_log",
    "resolve_host_secret",
    "resource_of",
    "same_definitions",
    "shown_name",
    "shown_names",
    "signing_algorithm",
    "skill_change",
    "skill_definition",
    "store_path",
    "verify_log",
    "verify_rows",
    "view_digest",
    "without_format",
]
