"""The one inbound classifier: commands, secrets and what may reach the model, on normalized text."""

from __future__ import annotations

import base64
import math
import random
import uuid
from collections import Counter
from pathlib import Path

import pytest

from playa.core import (
    Command,
    CommandContext,
    CommandRouter,
    classify,
    holds_key,
    looks_like_credential,
    mask_known_keys,
    normalize,
)
from support.chat import RecordingModel, ScriptedUI, msg
from support.host import new_host

KEY = "sk-proj-Zq7Xw3KpL9vR2mN8bT4yF6hJ"


async def _noop(ctx: CommandContext) -> str:
    return ""


def router() -> CommandRouter:
    return CommandRouter(
        [
            Command("help", "help", _noop, owner_only=False),
            Command("mcp_add", "add", _noop, carries_secret=lambda args: "--bearer" in args),
            Command("mcp_list", "list", _noop),
            Command("reset", "reset", _noop),
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


@pytest.mark.parametrize("key", ["q/htfobw90Q/+GQ0XGYPQmzQ+z/9", "q/Mmaa8xltTm+LPTHNm/GKOA+z/9"])
def test_a_key_after_an_auth_scheme_is_withheld_when_its_draw_looks_tame(key: str) -> None:
    """Random base64 that its ``/`` and ``+`` cut into short, tame runs: no shape test alone catches it."""
    assert not looks_like_credential(key)
    inbound = classify(f"Bearer {key}", router())
    assert inbound.credential_shaped and not inbound.to_model


def test_every_random_base64_key_after_bearer_is_withheld() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        key = base64.b64encode(rng.randbytes(16)).decode().rstrip("=")
        for text in (f"Bearer {key}", f"bearer q/{key}+z/9", f"Token {key.replace('+', '-')}"):
            assert classify(text, router()).credential_shaped, text


@pytest.mark.parametrize(
    "text",
    ["Bearer tokens expire", "Bearer token", "Basic authentication", "Token internationalization"],
)
def test_a_sentence_about_a_scheme_reaches_the_model(text: str) -> None:
    inbound = classify(text, router())
    assert inbound.to_model and not inbound.credential_shaped


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "internationalization",
        "https://example.com/some/long/path/to/a/page",
        "/usr/local/lib/python3.11/site-packages",
        "What does sk-this mean?",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1",
        "a" * 40,
        "set npm_config_cache and hf_transfer, then call hf_doc_search",
        "commit 9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc broke the build",
        "mcp_add is the command I used yesterday; how does --tools work?",
        "reset the counter to 3",
    ],
)
def test_ordinary_messages_reach_the_model(text: str) -> None:
    inbound = classify(text, router())
    assert inbound.to_model and not inbound.credential_shaped
    assert inbound.model_text == inbound.text and not inbound.carries_secret


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


def _entropy(word: str) -> float:
    counts = Counter(word)
    return -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())


def test_hex_keys_are_key_shaped_whatever_their_entropy() -> None:
    rng = random.Random(29)
    keys = [f"{rng.getrandbits(128):032x}" for _ in range(400)]
    low = [key for key in keys if _entropy(key) < 3.5 and any(c.isalpha() for c in key)]
    assert len(low) > 40  # about a fifth of random 32-digit keys: the entropy floor alone misses them
    assert all(map(looks_like_credential, low))
    assert all(looks_like_credential(key.upper()) for key in low)
    assert all(looks_like_credential("uk_" + key) for key in low)  # a run inside a word
    assert all(looks_like_credential(":".join(key[i : i + 2] for i in range(0, 32, 2))) for key in low)
    assert looks_like_credential(str(uuid.UUID(int=rng.getrandbits(128))))


def test_base64_keys_are_key_shaped_and_names_are_not() -> None:
    rng = random.Random(2929)
    # Letters and digits: one in 150 such keys has no digit, and letters alone are left to a
    # known prefix, as a camelCase name is letters alone too.
    drawn = [base64.b64encode(rng.randbytes(18)).decode() for _ in range(400)]
    keys = [key for key in drawn if any(c.isdigit() for c in key)]
    assert len(keys) > 390
    assert all(map(looks_like_credential, keys))
    assert all(looks_like_credential(key.replace("+", "-").replace("/", "_")) for key in keys)
    for word in (
        "hf_doc_search",
        "npm_search_packages",
        "secret_manager_read",
        "sk-learn-tools",
        "deadbeefdeadbeefdeadbeefdeadbeef",  # hex without a digit is a word
        "1" * 40,
        "a1" * 20,  # too few different characters for a key
        "listRepositoryCommitsPaged",
        "ThisIsALongCamelCaseIdentifier",
        "X-Custom-Header-Name",
        "src/playa/host/_inbound.py",
        # Names of short words, digits among them: servers, tools, headers.
        "github-enterprise-2024",
        "my-company-jira-prod1",
        "search_v2_documents_2024",
        "X-Goog-Api-Client-Version-2",
        "mcp-server-2025-06-18",
    ):
        assert not looks_like_credential(word), word


@pytest.mark.parametrize(
    "value",
    [
        f"--bearer={KEY}",
        f"echo,{KEY}",
        f"X-Key:{KEY}",
        f'"{KEY}"',
        f"https://x.test/mcp?k={KEY}",
    ],
)
def test_a_value_holds_a_key_in_any_part_of_it(value: str) -> None:
    assert holds_key(value)
    assert not holds_key(value.replace(KEY, "docs"))


@pytest.mark.parametrize(
    "text",
    [
        f"mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"\\mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"//mcp_add docs https://x.test/mcp --bearer {KEY}",
        f"/add-mcp docs https://x.test/mcp --bearer {KEY}",
        f"add-mcp docs https://x.test/mcp --bearer {KEY}",
        f"mcp-add docs https://x.test/mcp --header X-Key:{KEY}",
        f"mcpadd docs https://x.test/mcp {KEY}",
        f"MCP add docs https://x.test/mcp --bearer {KEY}",
        f"\u200b\\\\mcp_add--bearer={KEY}",
        f"\\reset {KEY}",
        # The command's own rule: a --bearer value is a secret even when it is not key-shaped.
        "mcp_add docs https://x.test/mcp --bearer hunter2hunter2",
    ],
)
def test_a_message_close_to_a_command_that_carries_a_key_is_withheld_like_one(text: str) -> None:
    inbound = classify(text, router())
    assert inbound.command is None
    assert inbound.near_command in ("mcp_add", "reset")
    assert inbound.carries_secret and not inbound.to_model


@pytest.mark.parametrize(
    "text",
    [
        "`/mcp_add docs https://x.test/mcp --bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0`",
        "```\n/mcp_add docs https://x.test/mcp --bearer hunter2hunter2\n```",
        "> /mcp_add docs https://x.test/mcp --bearer hunter2hunter2",
        "- /mcp_add docs https://x.test/mcp --bearer hunter2hunter2",
        "why does (/mcp_add docs https://x.test/mcp --bearer hunter2hunter2) fail?",
        "I ran /mcp_add docs https://x.test/mcp --bearer hunter2hunter2 and it failed",
        f'the docs say "\\reset {KEY}"',
    ],
)
def test_a_command_quoted_further_in_a_message_with_its_key_is_withheld_like_one(text: str) -> None:
    inbound = classify(text, router())
    assert inbound.command is None and inbound.near_command in ("mcp_add", "reset")
    assert inbound.carries_secret and not inbound.to_model


@pytest.mark.parametrize(
    "text",
    [
        "run `/mcp_list` and look in /usr/local/bin/mcp_add for the script",
        "the notes are in docs/mcp_add.md, and /mcp_list shows the servers",
        "use /reset after you rotate the token",
    ],
)
def test_a_command_named_in_a_sentence_without_a_key_is_text(text: str) -> None:
    inbound = classify(text, router())
    assert inbound.near_command is None and inbound.to_model


def test_the_repr_of_a_classified_message_names_its_kind_and_never_its_text() -> None:
    near = classify(f"//mcp_add docs https://x.test/mcp --bearer {KEY}", router())
    masked = classify(f"my key is {KEY}", router())
    assert repr(near) == "Inbound(near /mcp_add, secret=True)"
    assert repr(masked) == "Inbound(text, keys masked, secret=True)"


def test_a_one_word_command_is_close_only_after_a_slash() -> None:
    inbound = classify(f"reset my token {KEY} please", router())
    assert inbound.near_command is None and inbound.to_model
    assert KEY not in inbound.model_text


def test_an_unknown_command_close_to_a_known_one_names_it() -> None:
    inbound = classify(f"/add_mcp docs https://x.test/mcp --bearer {KEY}", router())
    assert inbound.command is not None and inbound.near_command == "mcp_add"
    assert inbound.carries_secret and not inbound.to_model


WELL_KNOWN = [
    "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Y",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123",
    "sk-ant-api03-" + "Zq7Xw3KpL9vR2mN8bT4yF6hJ" * 3,
    KEY,
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "xoxp-123456789012-1234567890123-AbCdEfGhIjKl",
    "AKIAIOSFODNN7EXAMPLE",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("key", WELL_KNOWN)
def test_a_well_known_key_in_a_sentence_is_masked_before_the_model(key: str) -> None:
    inbound = classify(f"My key is {key}, what do I do with it? (token={key}.)", router())
    assert inbound.to_model and inbound.carries_secret and not inbound.credential_shaped
    assert key not in inbound.model_text
    assert inbound.model_text == "My key is [redacted], what do I do with it? (token=[redacted].)"
    assert mask_known_keys(inbound.text) == (inbound.model_text, 2)


@pytest.mark.anyio
async def test_the_model_and_the_history_get_the_sentence_without_its_key_and_the_person_is_told(
    tmp_path: Path,
) -> None:
    key = WELL_KNOWN[0]
    model = RecordingModel()
    async with new_host(tmp_path, model) as host:
        session = await host.session("console:mask", owner="owner")
        ui = ScriptedUI()
        reply = await host.handle(session, msg(f"please use {key} for the repo", ref="m1"), ui)
        assert reply is not None and reply.kind == "agent"
        history = host.history(session).path.read_text()
    seen = repr(model.seen)
    assert key not in seen and "please use [redacted] for the repo" in seen
    assert key not in history and "please use [redacted] for the repo" in history
    assert ui.deleted == ["m1"]
    assert [note for note in ui.sent if "the agent got it with [redacted]" in note]
    assert not [text for text in ui.sent if key in text]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "text",
    [f"mcp_add docs https://x.test/mcp --bearer {KEY}", f"//mcp_add docs https://x.test/mcp --bearer {KEY}"],
)
async def test_a_message_close_to_a_command_never_reaches_the_model_and_points_to_it(
    tmp_path: Path, text: str
) -> None:
    model = RecordingModel()
    async with new_host(tmp_path, model) as host:
        host.commands.add(Command("mcp_add", "add", _noop))
        session = await host.session("console:near", owner="owner")
        ui = ScriptedUI()
        reply = await host.handle(session, msg(text, ref="m1"), ui)
        assert host.history(session).messages == []
    assert reply is not None and reply.kind == "command"
    assert "looks like /mcp_add" in reply.text and "I deleted it" in reply.text
    assert KEY not in reply.text
    assert model.seen == [] and ui.deleted == ["m1"]


@pytest.mark.anyio
async def test_an_unknown_command_close_to_a_known_one_is_answered_with_it_and_deleted(
    tmp_path: Path,
) -> None:
    model = RecordingModel()
    async with new_host(tmp_path, model) as host:
        host.commands.add(Command("mcp_add", "add", _noop))
        session = await host.session("console:unknown", owner="owner")
        ui = ScriptedUI()
        reply = await host.handle(
            session, msg(f"/add_mcp docs https://x.test/mcp --bearer {KEY}", ref="m1"), ui
        )
    assert reply is not None and reply.kind == "command"
    assert reply.text.startswith("Unknown command. Did you mean /mcp_add?")
    assert KEY not in reply.text and ui.deleted == ["m1"] and model.seen == []
