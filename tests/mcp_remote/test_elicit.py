"""Which form fields ask for a secret: refused without asking, as the protocol advises."""

from __future__ import annotations

from typing import Any

import pytest

from playa.mcp_remote import credential_field


@pytest.mark.parametrize(
    ("name", "schema"),
    [
        ("password", {"type": "string"}),
        ("apiKey", {"type": "string"}),
        ("github_token", {"type": "string"}),
        ("x", {"type": "string", "title": "Your PIN"}),
        ("x", {"type": "string", "description": "Your secret"}),
        ("x", {"type": "string", "description": "Enter your API key. We never store it."}),
        ("x", {"type": "string", "description": "Not required, but paste your token here"}),
        ("x", {"type": "string", "format": "password"}),
        ("x", {"type": "string", "writeOnly": True}),
    ],
)
def test_a_field_that_asks_for_a_secret_is_one(name: str, schema: dict[str, Any]) -> None:
    assert credential_field(name, schema)


@pytest.mark.parametrize(
    ("name", "schema"),
    [
        ("keyword", {"type": "string", "description": "A word to search for"}),
        # server-everything's form warns against giving a pin: a warning is no request.
        (
            "integer",
            {
                "type": "integer",
                "title": "Integer",
                "description": "Your favorite integer (do not give us your phone number, pin, or other sensitive info)",
            },
        ),
        (
            "email",
            {"type": "string", "description": "Your email (never shared with anyone, no password needed)"},
        ),
    ],
)
def test_a_field_that_only_warns_about_secrets_is_asked(name: str, schema: dict[str, Any]) -> None:
    assert not credential_field(name, schema)
