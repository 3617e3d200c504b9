"""Splitting replies into Telegram messages, measured in UTF-16 code units as Telegram counts."""

from __future__ import annotations

import importlib

from hypothesis import given
from hypothesis import strategies as st

from playa.telegram import MESSAGE_LIMIT, split_message, utf16_len
from playa.telegram._markdown import render_markdown
from playa.telegram._render import render
from playa.telegram._split import split_formatted

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


FAMILY = "👨\u200d👩\u200d👧\u200d👦"  # one grapheme cluster, 11 UTF-16 units
FLAG = "🇫🇷"


def test_a_hard_cut_never_splits_a_zwj_emoji_a_flag_or_an_accent() -> None:
    for cluster in (FAMILY, FLAG, "e\u0301", "👍🏽"):
        text = "a" * 7 + cluster * 5
        for limit in range(utf16_len(cluster), 30):
            parts = split_message(text, limit=limit)
            assert "".join(parts) == text
            for part in parts:
                assert utf16_len(part) <= limit
                rest = part.lstrip("a")
                assert rest == cluster * (len(rest) // len(cluster)), (limit, parts)


@given(texts, st.integers(min_value=12, max_value=60))
def test_every_part_keeps_valid_formatting_of_its_own_text(text: str, limit: int) -> None:
    markdown = f"**{text}** and `x{text}` then _y_"
    plain, spans = render_markdown(markdown)
    for part in split_formatted(plain, spans, limit):
        size = utf16_len(part.text)
        assert 0 < size <= limit
        for entity in part.entities:
            offset, length = int(str(entity["offset"])), int(str(entity["length"]))
            assert length > 0
            assert offset >= 0 and offset + length <= size


def test_markdown_becomes_entities_and_unmatched_markers_stay() -> None:
    plain, spans = render_markdown(
        "# Title\n**bold** *it* `c` ~~s~~ snake_case_name 2 * 3 <name>\n> q\n```py\nx = 1\n```"
    )
    assert plain == "Title\nbold it c s snake_case_name 2 * 3 <name>\nq\nx = 1"
    kinds = {(s.type, plain[s.start : s.end]) for s in spans}
    assert kinds == {
        ("bold", "Title"),
        ("bold", "bold"),
        ("italic", "it"),
        ("code", "c"),
        ("strikethrough", "s"),
        ("blockquote", "q"),
        ("pre", "x = 1"),
    }


def test_a_credential_split_by_markup_is_redacted_and_sent_plain() -> None:
    key = "sk-abcdef0123456789"

    def redact(text: str) -> str:
        return text.replace(key, "[redacted]")

    parts = render("the key is sk-abcdef**0123**456789 ok", markdown=True, redact=redact)
    assert [p.text for p in parts] == ["the key is [redacted] ok"]
    assert parts[0].entities == []
