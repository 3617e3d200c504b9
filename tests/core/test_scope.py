from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from playa.core import folder_scope, scope_folder

SAFE = re.compile(r"[A-Za-z0-9_~-]+")


@given(st.text(min_size=1, max_size=300))
def test_every_scope_maps_to_one_safe_path_component(scope: str) -> None:
    folder = scope_folder(scope)
    assert SAFE.fullmatch(folder)
    assert folder not in (".", "..")
    assert len(folder) <= 160


@given(st.text(min_size=1, max_size=200), st.text(min_size=1, max_size=200))
def test_different_scopes_never_share_a_folder(a: str, b: str) -> None:
    if a != b:
        assert scope_folder(a) != scope_folder(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [("console:a_b", "console:a:b"), ("telegram:-100", "telegram:_100"), ("x/y", "x_2fy"), ("..", "_2e_2e")],
)
def test_lookalike_scopes_stay_apart(a: str, b: str) -> None:
    assert scope_folder(a) != scope_folder(b)


def test_a_readable_scope_stays_readable() -> None:
    assert scope_folder("telegram:-100123") == "telegram_3a-100123"


def test_an_empty_scope_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        scope_folder("")


@given(st.text(min_size=1, max_size=40))
def test_a_scopes_folder_names_it_back_unless_it_was_cut(scope: str) -> None:
    folder = scope_folder(scope)
    assert folder_scope(folder) == (None if "~" in folder else scope)


@pytest.mark.parametrize("folder", ["", "a_zz", "a_4", "_41", "a.b", "x~" + "0" * 64, "_ff"])
def test_a_folder_no_scope_maps_to_names_none(folder: str) -> None:
    assert folder_scope(folder) is None
