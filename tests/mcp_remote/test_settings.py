"""The operator's settings for remote MCP servers are checked when they are made."""

from __future__ import annotations

import math

import pytest

from playa.exceptions import ConfigError
from playa.mcp_remote import RemoteMcpSettings


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"backoff_initial": 0.0}, "RemoteMcpSettings.backoff_initial must be a positive number of seconds"),
        ({"backoff_max": math.inf}, "RemoteMcpSettings.backoff_max must be a positive number of seconds"),
        ({"backoff_initial": 120.0, "backoff_max": 60.0}, "backoff_max \\(60.0\\) is below backoff_initial"),
        (
            {"approval_interval": 0.0},
            "RemoteMcpSettings.approval_interval must be a positive number of seconds",
        ),
        ({"approval_interval": math.nan}, "RemoteMcpSettings.approval_interval must be a positive number"),
        ({"max_tools_per_server": 0}, "RemoteMcpSettings.max_tools_per_server must be at least 1, got 0"),
        ({"oauth_callback_port": -1}, "RemoteMcpSettings.oauth_callback_port must be a port"),
        ({"oauth_callback_port": 65536}, "RemoteMcpSettings.oauth_callback_port must be a port"),
        # A client id document must be fetched over https, and a bare origin is no document.
        (
            {"oauth_client_metadata_url": "http://example.com/client.json"},
            "RemoteMcpSettings.oauth_client_metadata_url must be an https URL with a path",
        ),
        (
            {"oauth_client_metadata_url": "https://example.com"},
            "RemoteMcpSettings.oauth_client_metadata_url must be an https URL with a path",
        ),
    ],
)
def test_impossible_settings_are_refused_naming_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RemoteMcpSettings(**fields)  # type: ignore[arg-type]


def test_the_default_settings_are_valid_and_back_off_as_documented() -> None:
    settings = RemoteMcpSettings()
    assert [settings.backoff(n) for n in (1, 2, 3, 5, 10)] == [60.0, 120.0, 240.0, 900.0, 900.0]
