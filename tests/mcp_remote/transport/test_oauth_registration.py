"""What Playa registers as (SEP-837): the application type its redirect address calls for."""

from __future__ import annotations

import pytest

from playa.mcp_remote.transport import client_metadata


@pytest.mark.parametrize(
    ("redirect", "kind"),
    [
        ("http://127.0.0.1:8765/oauth/callback", "native"),  # the console's loopback callback
        ("http://localhost/oauth/callback", "native"),
        ("https://bot.example.com/oauth/callback", "web"),  # a bot's public address
    ],
)
def test_the_application_type_is_the_one_the_redirect_calls_for(redirect: str, kind: str) -> None:
    metadata = client_metadata(redirect)
    assert metadata.application_type == kind
    assert [str(uri) for uri in metadata.redirect_uris or []] == [redirect]
