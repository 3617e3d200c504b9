"""Splitting replies into Telegram messages, measured in UTF-16 code units as Telegram counts."""

from __future__ import annotations

import importlib

from hypothesis import given
from hypothesis import strategies as st

from playa.telegram import MESSAGE_LIMIT, split_message, utf16_len

# Text with ASCII, accents, emoji (2 units each), and many line breaks.
texts = st.text(
    alphabet=st.sampled_from(["a", "é", " ", "\n", "😀", "🎉", "中", "\U0001f600", "x"]), max_size=400
)


def test_utf16_length_counts_characters_outside_the_bmp_twice() -> None:
    assert utf16_len("abc") == 3
    assert utf16_len("😀") == 2
    assert utf16_len("é😀中") == 4


def test_a_short_text_is_one_message() -> None:
    assert split_message("hello\nworld") == ["hello\nworld"]


def test_text_is_cut_at_the_last_line_break_that_fits() -> None:
    lines = ["a" * 40] * 5
    assert split_message("\n".join(lines), limit=100) == ["\n".join(lines[:2])] * 2 + [lines[4]]


def test_a_line_longer_than_the_limit_is_cut_hard_without_splitting_an_emoji() -> None:
    parts = split_message("a" + "😀" * 10, limit=4)
    assert parts == ["a😀", "😀😀", "😀😀", "😀😀", "😀😀", "😀"]
    assert all(utf16_len(p) <= 4 for p in parts)


def test_blank_parts_are_left_out() -> None:
    assert split_message("\n\n\n") == []
    parts = split_message("a" * 5 + "\n\n\n\n" + "b" * 5, limit=6)
    assert [part.strip() for part in parts] == ["a" * 5, "b" * 5]


@given(texts, st.integers(min_value=2, max_value=50))
def test_every_part_fits_and_nothing_but_cut_line_breaks_is_lost(text: str, limit: int) -> None:
    parts = split_message(text, limit=limit)
    assert all(0 < utf16_len(part) <= limit for part in parts)
    assert all(part.strip() for part in parts)
    # The parts are the text's own slices, in order; only line breaks at cuts and blank
    # stretches between parts are left out.
    position = 0
    for part in parts:
        found = text.find(part, position)
        assert found >= 0
        assert not text[position:found].strip()
        position = found + len(part)
    assert not text[position:].strip()


def test_the_default_limit_is_telegrams() -> None:
    assert MESSAGE_LIMIT == 4096
    text = "😀" * 5000
    parts = split_message(text)
    assert [utf16_len(p) for p in parts] == [4096, 4096, 1808]
    assert "".join(parts) == text


def test_the_package_names_its_public_surface() -> None:
    module = importlib.import_module("playa.telegram")
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name
        assert not name.startswith("_")
