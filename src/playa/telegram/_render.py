"""Text as the messages that carry it: redacted, formatted, split at Telegram's limit."""

from __future__ import annotations

from collections.abc import Callable

from ._markdown import render_markdown
from ._split import MESSAGE_LIMIT, Part, split_formatted, utf16_len

__all__ = ["one_part", "plain", "render"]


def render(text: str, *, markdown: bool, redact: Callable[[str], str]) -> list[Part]:
    """``text`` as the messages that carry it: redacted first, then formatted, then split.

    A credential that markup splits (``sk-ab**cd**ef``) is whole again in the rendered text,
    so that text is checked too; if it still holds one, it is sent plain and redacted.
    """
    text = redact(text)
    if not markdown:
        return split_formatted(text, [])
    plain, spans = render_markdown(text)
    cleaned = redact(plain)
    if cleaned != plain:
        return split_formatted(cleaned, [])
    return split_formatted(plain, spans)


def one_part(text: str, *, redact: Callable[[str], str]) -> Part:
    """One message's text, redacted, cut to the limit: an edited message cannot become two."""
    first, *rest = render(text, markdown=False, redact=redact)
    if not rest:
        return first
    cut = first.text if utf16_len(first.text) < MESSAGE_LIMIT else first.text[:-2]
    return Part(cut + "…", [])


def plain(text: str) -> list[Part]:
    """The bot's own text (nothing in it to redact) as the messages that carry it."""
    return render(text, markdown=False, redact=_as_is)


def _as_is(text: str) -> str:
    return text
