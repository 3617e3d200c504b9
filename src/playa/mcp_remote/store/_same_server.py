"""Whether a stored entry is still the server a writer was built from: the rule of a conditional write.

A server writes its own entry back while it runs (pins it adopted, the owner's decisions, new
tokens, a policy). Between its last look and its write, the owner may replace the entry
(``/mcp_add`` with the same name and a new key or URL) or remove it; the late write must then be
dropped, or it would put the old key back. What makes two entries the same server is what the
owner gave: the URL, transport, tool filter and headers (``ServerEntry``'s equality), and of an
OAuth grant its client and a machine client's private key. Pins, policy and tokens are not
compared: the server changes them as it runs. A client the server registered in a login is
compared, and the writer keeps what it wrote last as what it was built from: a re-add that drops
the registration (a new login) is another server, and one that keeps the owner's client and key
is the same.
"""

from __future__ import annotations

from ._entry import ServerEntry
from ._grant import OAuthGrant

__all__ = ["same_server"]


def same_server(stored: ServerEntry, built_from: ServerEntry) -> bool:
    """Whether ``stored`` is the server ``built_from`` was: the owner's choices and credentials alike."""
    return stored == built_from and _given(stored.oauth) == _given(built_from.oauth)


def _given(grant: OAuthGrant | None) -> tuple[str | None, str | None, str | None] | None:
    """The credentials of a grant that are not its tokens: its client's id and secret, a machine's key."""
    if grant is None:
        return None
    client = grant.client
    if client is None:
        return (None, None, grant.client_key)
    return (client.client_id, client.client_secret, grant.client_key)
