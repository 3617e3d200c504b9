"""The one inbound classifier: commands, secrets and what may reach the model, on normalized text."""

from __future__ import annotations

import pytest

from playa.host import Command, CommandContext, CommandRouter, classify, looks_like_credential, normalize

KEY = "sk-proj-Zq7Xw3KpL9vR2mN8bT4yF6hJ"


async def _noop(ctx: CommandContext) -> str:
    return ""


def router() -> CommandRouter:
    return CommandRouter(
        [
            Command("help", "help", _noop, owner_only=False),
            Command("mcp_add", "add", _noop, carries_secret=lambda args: "--bearer" in args),
        ]
    )


@pytest.mark.parametrize(
    "text",
    [
        f"/mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"\u200b/mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"\ufeff/mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"\u2060\u200d /mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"／mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"∕mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"⁄mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"/ｍｃｐ_add docs https://x.test/mcp --bearer {KEY}",
        f"/mc\u200bp_add docs https://x.test/mcp --bearer {KEY}",
    ],
)
def test_hidden_and_look_alike_commands_are_still_commands_that_carry_a_secret(text: str) -> None:
    inbound = classify(text, router())
    assert inbound.command is not None and inbound.command.name == "mcp_add"
    assert inbound.carries_secret
    assert not inbound.to_model
    assert KEY in inbound.command.args  # the key reaches its command as typed


def test_a_mistyped_mcp_command_carries_a_secret_and_never_reaches_the_model() -> None:
    inbound = classify("/mcp-add docs https://x.test --bearer whatever", router())
    assert inbound.command is not None and inbound.carries_secret and not inbound.to_model


def test_any_command_with_a_key_shaped_argument_carries_a_secret() -> None:
    assert classify(f"/help {KEY}", router()).carries_secret
    assert not classify("/help me please", router()).carries_secret


@pytest.mark.parametrize(
    "text",
    [
        KEY,
        f"  {KEY}  ",
        f"\u200b{KEY}",
        f"Bearer {KEY}",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "xoxb-1234567890-abcdefghijkl",
        "glpat-abcdefghij1234567890",
        "AKIAIOSFODNN7EXAMPLE",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ],
)
def test_a_message_that_is_only_a_key_never_reaches_the_model(text: str) -> None:
    inbound = classify(text, router())
    assert inbound.command is None
    assert inbound.credential_shaped and inbound.carries_secret
    assert not inbound.to_model


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "internationalization",
        "https://example.com/some/long/path/to/a/page",
        "/usr/local/lib/python3.11/site-packages",
        "What does sk-this mean?",
        f"My key is {KEY}, what do I do with it?",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1",
    ],
)
def test_ordinary_messages_reach_the_model(text: str) -> None:
    inbound = classify(text, router())
    assert inbound.to_model and not inbound.credential_shaped


def test_normalize_strips_format_characters_and_folds_only_the_first_word() -> None:
    assert normalize("\u200b／ｍｃｐ_list") == "/mcp_list"
    assert normalize("／mcp_add x ｆｕｌｌ") == "/mcp_add x ｆｕｌｌ"
    assert normalize("hello\u200bworld") == "helloworld"
    assert normalize("ｈｅｌｌｏ") == "ｈｅｌｌｏ"


def test_credential_shape_needs_length_mixed_alphabets_and_entropy() -> None:
    assert looks_like_credential("sk-12345678")
    assert not looks_like_credential("sk-1234")
    assert not looks_like_credential("abcdefghijklmnopqrstuvwxyz")
    assert not looks_like_credential("a1" * 15)
    assert looks_like_credential("Zq7Xw3KpL9vR2mN8bT4yF6hJ")
