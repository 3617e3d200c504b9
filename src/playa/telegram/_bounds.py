"""The rule for the bot's settings in seconds; a ``ConfigError`` names the setting and the value
given (counts: ``core.check_at_least``)."""

from __future__ import annotations

import math

from ..exceptions import ConfigError

__all__ = ["check_seconds"]


def check_seconds(settings: object, name: str, *, positive: bool) -> None:
    """Refuse a setting that is not a finite number of seconds (``> 0`` when ``positive``), naming it."""
    value = getattr(settings, name)
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value > 0 if positive else value >= 0)
    )
    if not ok:
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(
            f"{type(settings).__name__}.{name} must be a finite number of seconds {bound}, got {value!r}"
        )
