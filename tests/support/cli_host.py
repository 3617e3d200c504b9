"""A host as the CLI builds it: the remote-MCP extension configured from an environment."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Unpack

from playa.agent import Host
from playa.cli import remote_mcp
from support.host import ConfigOverrides, ModelSource, host_config

__all__ = ["cli_host"]


def cli_host(
    data_dir: Path,
    environ: Mapping[str, str],
    *,
    console: bool,
    model: ModelSource | None = None,
    **overrides: Unpack[ConfigOverrides],
) -> Host:
    """A host for ``data_dir`` whose remote-MCP extension ``environ`` configures, for the console or
    for a bot (``console``); open it with ``async with``."""
    config = host_config(data_dir, model, **overrides)
    return Host(config, [remote_mcp(config, environ, console=console)])
