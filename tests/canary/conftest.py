"""Fixtures of the real-process canary suites."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["DEBUG", "WARNING"])
def level(request: pytest.FixtureRequest) -> str:
    """The log level of the ``playa chat`` a suite runs: a suite that takes it runs at each, so
    that its oracle holds at every log level."""
    return str(request.param)
