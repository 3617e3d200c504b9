"""check_at_least: the operator's count settings, each at least its floor."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from playa.core import check_at_least
from playa.exceptions import ConfigError


@dataclass
class Limits:
    pages: int = 1
    bytes: int = 1024


def test_settings_at_their_floors_pass() -> None:
    check_at_least(Limits(), pages=1, bytes=1024)


def test_the_first_setting_below_its_floor_is_named_with_the_floor_and_the_value() -> None:
    with pytest.raises(ConfigError, match=r"^Limits\.pages must be at least 1, got 0$"):
        check_at_least(Limits(pages=0, bytes=0), pages=1, bytes=1024)
    with pytest.raises(ConfigError, match=r"^Limits\.bytes must be at least 1024, got 1023$"):
        check_at_least(Limits(bytes=1023), pages=1, bytes=1024)


@pytest.mark.parametrize("value", [True, 2.0, "3", None])
def test_a_setting_that_is_not_a_whole_number_is_refused_naming_it(value: object) -> None:
    with pytest.raises(ConfigError, match=r"^Limits\.pages must be a whole number of at least 1, got "):
        check_at_least(Limits(pages=value), pages=1)  # type: ignore[arg-type]
