"""Secrets' rules: what looks like a credential, the redactor that removes known ones from text,
and the outbound gate that removes them from every log record."""

from ._credentials import KEY_PREFIXES, holds_key, looks_like_credential, mask_known_keys, only_a_credential
from ._forms import MIN_SECRET_LENGTH, REDACTED, auth_credential, encoded_forms, is_http_token
from ._outbound import PIECE, OutboundSecrets, install_outbound_gate, outbound_secrets
from ._redact import Redactor

__all__ = [
    "KEY_PREFIXES",
    "MIN_SECRET_LENGTH",
    "PIECE",
    "REDACTED",
    "OutboundSecrets",
    "Redactor",
    "auth_credential",
    "encoded_forms",
    "holds_key",
    "install_outbound_gate",
    "is_http_token",
    "looks_like_credential",
    "mask_known_keys",
    "only_a_credential",
    "outbound_secrets",
]
