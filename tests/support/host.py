"""Hosts for tests: one way to configure a host and to build one, with the remote-MCP extension or
without it, and a clock that tests set."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypedDict, Unpack

from pydantic_ai.models import Model

from playa.agent import GateLimits, Host, HostConfig, ModelLimits, ToolSearchLimits
from playa.core import EnvPolicy, Extension, Storage
from playa.mcp_remote import (
    ConnectionSettings,
    Connector,
    HostSecret,
    NoHostSecret,
    RemoteMcpExtension,
    RemoteMcpSettings,
)
from support.chat import RecordingModel, Script

__all__ = [
    "HEALTHY",
    "SETTINGS",
    "Clock",
    "ConfigOverrides",
    "ModelSource",
    "host_config",
    "new_host",
    "remote_host",
]

HEALTHY = ConnectionSettings(connect_timeout=15.0, call_timeout=15.0, close_timeout=5.0)
"""Generous for the healthy loopback servers tests use: a busy machine must not fail them."""
SETTINGS = RemoteMcpSettings(connection=HEALTHY)

ModelSource = RecordingModel | Script | Model | str
"""A model as tests hold one: a recording or scripted model (its ``model()`` is used), a
pydantic-ai model, or a model's name (``"offline"``)."""


class ConfigOverrides(TypedDict, total=False):
    """The fields of :class:`HostConfig` a test may set besides the data folder and the model."""

    base_prompt: str
    env: EnvPolicy
    hook_timeout: float
    limits: GateLimits
    model_limits: ModelLimits
    tool_search: ToolSearchLimits
    context_tokens: int | None
    session_idle: float
    workspace_quota: int | None
    storage: Storage | None


def host_config(
    data_dir: Path, model: ModelSource | None = None, **overrides: Unpack[ConfigOverrides]
) -> HostConfig:
    """The host's configuration for ``data_dir``: the offline model unless ``model`` is given."""
    return HostConfig(data_dir=data_dir, model=_model(model), **overrides)


def new_host(
    data_dir: Path,
    model: ModelSource | None = None,
    extensions: Sequence[Extension] = (),
    **overrides: Unpack[ConfigOverrides],
) -> Host:
    """A host for ``data_dir`` with ``extensions``; open it with ``async with``."""
    return Host(host_config(data_dir, model, **overrides), list(extensions))


def remote_host(
    data_dir: Path,
    secret: HostSecret | NoHostSecret,
    model: ModelSource | None = None,
    settings: RemoteMcpSettings = SETTINGS,
    *,
    clock: Callable[[], float] = time.time,
    connector: Connector | None = None,
    **overrides: Unpack[ConfigOverrides],
) -> Host:
    """A host with the remote-MCP extension only (timeouts a healthy server meets on a busy
    machine, unless ``settings`` say otherwise); its model ``model``, or the offline one."""
    extension = RemoteMcpExtension(secret, settings=settings, connector=connector, clock=clock)
    return new_host(data_dir, model, [extension], **overrides)


class Clock:
    """A wall clock that the test sets or moves forward, for what the extension times."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _model(model: ModelSource | None) -> Model | str:
    if model is None:
        return "offline"
    if isinstance(model, RecordingModel | Script):
        return model.model()
    return model
