"""Talking to one remote MCP server: connections, egress policy, OAuth, budgets, tasks.

Reads entries from ``store``; knows nothing of chats, commands, questions or presentation: a
server's questions go to the ``Elicit`` handler its owner gives, and a login's link and code
through the owner's ``LoginLink``.
"""

from ._budget import (
    SSE_TRANSPORT_EVENT_LIMIT,
    ResultBudget,
    ResultTooLarge,
    format_size,
    oversized_event,
    too_large_reason,
)
from ._clock import Progress, ProgressReport
from ._connection import HANDSHAKE, Connection, Elicit, OnTools
from ._connector import Connector
from ._egress import (
    EgressMode,
    EgressPolicy,
    EgressRefused,
    GuardedBackend,
    Resolver,
    find_refusal,
    guarded_transport,
    system_resolver,
)
from ._endpoint import ConnectionSettings, Endpoint, TransportName, redacted, redactor_of
from ._errors import (
    ANSWERED,
    MAX_REASON,
    ConnectFailure,
    HttpTrace,
    call_error,
    challenge_description,
    connect_error,
    exception_tree,
    missing_scope,
    needs_scope,
    refused_although_granted,
    timed_out,
)
from ._oauth import (
    CALLBACK_PATH,
    OAUTH_ERROR_CODES,
    GrantStorage,
    LoginEnded,
    LoginExpired,
    LoginLink,
    ServerAuth,
    client_metadata,
    client_metadata_document,
    register_secrets,
    token_auth_method,
)
from ._result_type import complete_by_default
from ._revoke import Revocation, revoke
from ._tasks import (
    TERMINAL,
    PendingTask,
    cancel_task,
    create_task,
    get_task,
    poll_seconds,
    task_required,
    task_result,
    unrunnable_reason,
)

__all__ = [
    "ANSWERED",
    "CALLBACK_PATH",
    "HANDSHAKE",
    "MAX_REASON",
    "OAUTH_ERROR_CODES",
    "SSE_TRANSPORT_EVENT_LIMIT",
    "TERMINAL",
    "ConnectFailure",
    "Connection",
    "ConnectionSettings",
    "Connector",
    "EgressMode",
    "EgressPolicy",
    "EgressRefused",
    "Elicit",
    "Endpoint",
    "GrantStorage",
    "GuardedBackend",
    "HttpTrace",
    "LoginEnded",
    "LoginExpired",
    "LoginLink",
    "OnTools",
    "PendingTask",
    "Progress",
    "ProgressReport",
    "Resolver",
    "ResultBudget",
    "ResultTooLarge",
    "Revocation",
    "ServerAuth",
    "TransportName",
    "call_error",
    "cancel_task",
    "challenge_description",
    "client_metadata",
    "client_metadata_document",
    "complete_by_default",
    "connect_error",
    "create_task",
    "exception_tree",
    "find_refusal",
    "format_size",
    "get_task",
    "guarded_transport",
    "missing_scope",
    "needs_scope",
    "oversized_event",
    "poll_seconds",
    "redacted",
    "redactor_of",
    "refused_although_granted",
    "register_secrets",
    "revoke",
    "system_resolver",
    "task_required",
    "task_result",
    "timed_out",
    "token_auth_method",
    "too_large_reason",
    "unrunnable_reason",
]
