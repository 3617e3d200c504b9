from __future__ import annotations

import base64
from pathlib import Path

import pytest

from playa.core import MIN_SECRET_LENGTH, REDACTED, EnvPolicy
from support.chat import RecordingModel, ScriptedUI, msg
from support.host import new_host

pytestmark = pytest.mark.anyio

ENV = {
    "MCP_ENCRYPTION_SECRET": "host-secret-value-123",
    "PLAYA_DATABASE_URL": "postgresql://playa:db-password-value@db.internal/playa",
    "TELEGRAM_BOT_TOKEN": "123456:bot-token-value",
    "OPENAI_API_KEY": "sk-openai-key-value",
    "ANTHROPIC_API_KEY": "sk-ant-key-value",
    "CORP_TOKEN": "corp-token-value-1",
    "CORP_OTHER": "corp-other-value-2",
    "PATH": "/usr/bin",
    "HOME": "/home/me",
}


def test_the_defaults_deny_the_host_secret_the_database_the_bot_token_and_the_model_keys() -> None:
    policy = EnvPolicy(environ=ENV)
    assert [name for name in ENV if policy.denies(name)] == [
        "MCP_ENCRYPTION_SECRET",
        "PLAYA_DATABASE_URL",
        "TELEGRAM_BOT_TOKEN",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
    ]
    assert policy.denied_values() == {
        "host-secret-value-123",
        "postgresql://playa:db-password-value@db.internal/playa",
        "123456:bot-token-value",
        "sk-openai-key-value",
        "sk-ant-key-value",
    }


def test_operators_add_names_and_prefixes() -> None:
    policy = EnvPolicy(["CORP_TOKEN", "OTHER_*"], environ={**ENV, "OTHER_KEY": "other-key-value-3"})
    assert policy.denies("CORP_TOKEN") and policy.denies("OTHER_KEY") and policy.denies("OTHER_")
    assert not policy.denies("CORP_OTHER") and not policy.denies("PATH")
    assert {"corp-token-value-1", "other-key-value-3"} <= policy.denied_values()
    assert "corp-other-value-2" not in policy.denied_values()


def test_values_too_short_to_redact_safely_are_left_to_the_secret_floor() -> None:
    # The redactor takes no value shorter than MIN_SECRET_LENGTH: it would hit ordinary words.
    policy = EnvPolicy(
        environ={"OPENAI_API_KEY": "x" * (MIN_SECRET_LENGTH - 1), "HF_TOKEN": "y" * MIN_SECRET_LENGTH}
    )
    assert policy.denied_values() == {"y" * MIN_SECRET_LENGTH}


async def test_denied_values_never_reach_the_model_instructions(tmp_path: object) -> None:
    from pathlib import Path

    data_dir = Path(str(tmp_path))
    prompt = "You may know sk-openai-key-value and host-secret-value-123."
    recording = RecordingModel()
    async with new_host(data_dir, recording, base_prompt=prompt, env=EnvPolicy(environ=ENV)) as host:
        session = await host.session("console:t", owner="o")
        reply = await host.handle(session, msg("hello"), ScriptedUI())
    instructions = recording.instructions()
    assert "You may know [redacted] and [redacted]." in instructions
    assert reply is not None and "sk-openai-key-value" not in reply.text


async def test_outside_any_chat_the_host_redacts_denied_values_in_every_encoding(tmp_path: Path) -> None:
    # An error outside a chat (a failed group move, a message without a session) passes the
    # host's one redactor: the denied values go in their encoded forms too, not only verbatim.
    async with new_host(tmp_path, RecordingModel(), env=EnvPolicy(environ=ENV)) as host:
        encoded = base64.b64encode(b"sk-openai-key-value").decode()
        text = host.redact(None, f"failed: sk-openai-key-value; {encoded}; 123456:bot-token-value")
    assert text == f"failed: {REDACTED}; {REDACTED}; {REDACTED}"
