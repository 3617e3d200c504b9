"""The operator's settings for remote MCP servers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..exceptions import ConfigError
from ._connection import ConnectionSettings

__all__ = ["RemoteMcpSettings"]


@dataclass(frozen=True, kw_only=True)
class RemoteMcpSettings:
    """Timeouts, retry backoff and limits for every chat's remote servers.

    A failed server is retried after ``backoff_initial`` seconds, doubling after each failure
    up to ``backoff_max``; success or a re-add starts over. The transport's byte budget,
    ``ConnectionSettings.max_result_bytes``, bounds what is read of a result at all; the host's
    model-bound gate cuts what the model receives.
    """

    connection: ConnectionSettings = field(default_factory=ConnectionSettings)
    backoff_initial: float = 60.0
    backoff_max: float = 900.0
    max_tools_per_server: int = 100
    """Tools exposed per server; beyond it the owner chooses with ``--tools``."""
    login_timeout: float = 600.0
    """Seconds an OAuth authorization link stays usable."""

    def __post_init__(self) -> None:
        for name in ("backoff_initial", "backoff_max", "login_timeout"):
            value: float = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(
                    f"RemoteMcpSettings.{name} must be a positive number of seconds, got {value!r}"
                )
        if self.backoff_max < self.backoff_initial:
            raise ConfigError(
                f"RemoteMcpSettings.backoff_max ({self.backoff_max!r}) is below backoff_initial "
                f"({self.backoff_initial!r}): raise it, or lower backoff_initial"
            )
        if self.max_tools_per_server < 1:
            raise ConfigError(
                f"RemoteMcpSettings.max_tools_per_server must be at least 1, got {self.max_tools_per_server!r}"
            )

    def backoff(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failure in a row."""
        return float(min(self.backoff_max, self.backoff_initial * 2 ** max(0, failures - 1)))
