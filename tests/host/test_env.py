from __future__ import annotations

import pytest

from playa.host import EnvPolicy, Host, HostConfig
from support.chat import RecordingModel, ScriptedUI, msg

pytestmark = pytest.mark.anyio

ENV = {
    "MCP_ENCRYPTION_SECRET": "host-secret-value-123",
    "TELEGRAM_BOT_TOKEN": "123456:bot-token-value",
    "OPENAI_API_KEY": "sk-openai-key-value",
    "ANTHROPIC_API_KEY": "sk-ant-key-value",
    "CORP_TOKEN": "corp-token-value-1",
    "CORP_OTHER": "corp-other-value-2",
    "PATH": "/usr/bin",
    "HOME": "/home/me",
}


def test_denied_variables_are_removed_from_child_environments() -> None:
    scrubbed = EnvPolicy(environ=ENV).scrubbed()
    assert scrubbed == {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "CORP_TOKEN": "corp-token-value-1",
        "CORP_OTHER": "corp-other-value-2",
    }


def test_operators_add_names_and_prefixes() -> None:
    scrubbed = EnvPolicy(["CORP_TOKEN", "CORP_*"], environ=ENV).scrubbed()
    assert scrubbed == {"PATH": "/usr/bin", "HOME": "/home/me"}


async def test_denied_values_never_reach_the_model_instructions(tmp_path: object) -> None:
    from pathlib import Path

    data_dir = Path(str(tmp_path))
    prompt = "You may know sk-openai-key-value and host-secret-value-123."
    recording = RecordingModel()
    config = HostConfig(
        data_dir=data_dir, base_prompt=prompt, env=EnvPolicy(environ=ENV), model=recording.model()
    )
    async with Host(config) as host:
        session = await host.session("console:t", owner="o")
        reply = await host.handle(session, msg("hello"), ScriptedUI())
    instructions = recording.instructions()
    assert "You may know [redacted] and [redacted]." in instructions
    assert reply is not None and "sk-openai-key-value" not in reply.text
