"""A canary suite's console chat that ran as scripted: the server added, the model's script played."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from support import canary
from support.providers import ProviderServer

__all__ = ["played_chat"]


async def played_chat(
    data_dir: Path,
    provider: ProviderServer,
    lines: list[str],
    level: str,
    env: Mapping[str, str] = {},
    *,
    added: str,
) -> canary.ChatRun:
    """``canary.run_chat``, which must have added and connected the server ``added`` and played the
    model's script to its end: a canary that did not run shows nothing."""
    run = await canary.run_chat(data_dir, provider, lines, level, env)
    assert f"Added {added}: connected" in run.out, run.out[-3000:]
    assert provider.pending == 0, "the model's script was not played to its end"
    return run
