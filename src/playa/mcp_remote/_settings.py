"""The operator's settings for remote MCP servers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from mcp.client.auth.utils import is_valid_client_metadata_url

from ..core import QUESTION_TIMEOUT, check_at_least
from ..exceptions import ConfigError
from .store import DECISIONS, Decision
from .transport import ConnectionSettings, check_seconds

__all__ = ["CONNECT_WAIT_MARGIN", "FLOW_GUARD_MODES", "FlowGuardMode", "RemoteMcpSettings"]

FlowGuardMode = Literal["ask", "log", "off"]
FLOW_GUARD_MODES: Final[tuple[FlowGuardMode, ...]] = get_args(FlowGuardMode)

CONNECT_WAIT_MARGIN = 1.0
"""Seconds a turn waits for connects in flight beyond the connect timeout that bounds each."""


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
    approval_interval: float = 600.0
    """Seconds between two messages to the owner about one server's tool changes while the first
    is undecided: a server that changes its tools every second must not flood them. Later
    changes wait silently; the next message, and ``/mcp_review``, show the newest."""
    oauth_client_metadata_url: str | None = None
    """Where the operator serves Playa's OAuth client metadata document (``playa
    oauth-client-metadata`` prints it): its URL is Playa's client id at every authorization
    server that takes such documents, so none of them needs a registration."""
    oauth_callback_port: int = 0
    """The loopback port of the OAuth redirect listener; 0 takes a free one at each start. A
    fixed one keeps the redirect URI stable, as a client registered by hand may need."""
    default_policy: Decision = "allow"
    """What applies to a call of a tool whose owner set no policy for it or its server
    (``PLAYA_DEFAULT_POLICY``): ``allow``, ``ask`` (the owner decides each call) or ``deny``."""
    ask_timeout: float = QUESTION_TIMEOUT
    """Seconds a call under ``ask`` waits for the owner (``PLAYA_ASK_TIMEOUT``); unanswered, it is denied."""

    flow_guard: FlowGuardMode | None = None
    """What happens to a call whose arguments carry text of another server's result, or of a
    workspace file, read in the same turn (``PLAYA_FLOW_GUARD``): ``ask`` holds it for the owner,
    ``log`` lets it go and records it, ``off`` looks for none. None: ``ask`` in a group, where
    members' turns call tools too, and ``log`` in a private chat."""

    def flow_guard_for(self, *, group: bool) -> FlowGuardMode:
        """The flow guard's mode in a chat, as set or by default."""
        if self.flow_guard is not None:
            return self.flow_guard
        return "ask" if group else "log"

    def __post_init__(self) -> None:
        check_seconds(
            self,
            ("backoff_initial", "backoff_max", "login_timeout", "approval_interval", "ask_timeout"),
            floor="backoff_initial",
            ceiling="backoff_max",
        )
        url = self.oauth_client_metadata_url
        if url is not None and not is_valid_client_metadata_url(url):
            raise ConfigError(
                "RemoteMcpSettings.oauth_client_metadata_url must be an https URL with a path "
                f"(https://example.com/playa/client.json), got {url!r}"
            )
        if not 0 <= self.oauth_callback_port <= 65535:
            raise ConfigError(
                f"RemoteMcpSettings.oauth_callback_port must be a port (1 to 65535) or 0 for a free one, "
                f"got {self.oauth_callback_port!r}"
            )
        if self.default_policy not in DECISIONS:
            raise ConfigError(
                f"RemoteMcpSettings.default_policy must be one of {', '.join(DECISIONS)}, "
                f"got {self.default_policy!r}"
            )
        if self.flow_guard is not None and self.flow_guard not in FLOW_GUARD_MODES:
            raise ConfigError(
                f"RemoteMcpSettings.flow_guard must be one of {', '.join(FLOW_GUARD_MODES)}, "
                f"got {self.flow_guard!r}"
            )
        check_at_least(self, max_tools_per_server=1)

    @property
    def connect_wait(self) -> float:
        """Seconds a turn or a command waits for connects in flight, each bounded by the connect timeout."""
        return self.connection.connect_timeout + CONNECT_WAIT_MARGIN

    def backoff(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failure in a row."""
        return float(min(self.backoff_max, self.backoff_initial * 2 ** max(0, failures - 1)))
