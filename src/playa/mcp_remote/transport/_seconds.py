"""The rule for the operator's settings in seconds: each a positive finite number, and a ceiling
not below the setting it bounds; a ``ConfigError`` names the setting and how to fix it."""

from __future__ import annotations

import math

from ...exceptions import ConfigError

__all__ = ["check_seconds"]


def check_seconds(settings: object, names: tuple[str, ...], *, floor: str, ceiling: str) -> None:
    """Check the ``names`` of ``settings`` (a settings dataclass) as seconds, and ``ceiling`` >= ``floor``."""
    kind = type(settings).__name__
    for name in names:
        value: float = getattr(settings, name)
        if not (value > 0 and math.isfinite(value)):
            raise ConfigError(f"{kind}.{name} must be a positive number of seconds, got {value!r}")
    low: float = getattr(settings, floor)
    high: float = getattr(settings, ceiling)
    if high < low:
        raise ConfigError(
            f"{kind}.{ceiling} ({high!r}) is below {floor} ({low!r}): raise it, or lower {floor}"
        )
