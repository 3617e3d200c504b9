"""The OAuth error codes Playa repeats: the only words of an authorization server or identity
provider that may reach the owner, a log or the model."""

from __future__ import annotations

import json
from typing import Final

__all__ = ["OAUTH_ERROR_CODES", "error_code"]

OAUTH_ERROR_CODES: Final = frozenset(
    {
        "invalid_request",
        "unauthorized_client",
        "access_denied",
        "unsupported_response_type",
        "invalid_scope",
        "server_error",
        "temporarily_unavailable",
        "invalid_client",
        "invalid_grant",
        "unsupported_grant_type",
        "interaction_required",
        "login_required",
        "consent_required",
    }
)
"""The error codes of RFC 6749 (4.1.2.1, 5.2) and OpenID Connect: the only words of an
authorization server that Playa repeats where others may read them."""


def error_code(body: bytes) -> str:
    """`` (code)`` for an RFC 6749 error code in a token endpoint's JSON answer; else nothing."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    return f" ({error})" if error in OAUTH_ERROR_CODES else ""
