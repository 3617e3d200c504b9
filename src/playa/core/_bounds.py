"""The rule for the operator's count settings: each at least its floor, or a ``ConfigError`` that
names the setting, the floor and the value given."""

from __future__ import annotations

from ..exceptions import ConfigError

__all__ = ["check_at_least"]


def check_at_least(settings: object, **floors: int) -> None:
    """Refuse the first setting of ``settings`` (a settings dataclass) named in ``floors`` that is
    below its floor."""
    kind = type(settings).__name__
    for name, least in floors.items():
        value = getattr(settings, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{kind}.{name} must be a whole number of at least {least}, got {value!r}")
        if value < least:
            raise ConfigError(f"{kind}.{name} must be at least {least}, got {value!r}")
