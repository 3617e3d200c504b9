"""The model's Markdown as Telegram text plus entities (bold, italic, code, links, quotes…).

Measured against ``telegramify-markdown`` 1.4.1 (with its ``pyromark`` parser, a 1.6 MB binary
wheel): about 7 ms per KB of reply, and it drops text that looks like HTML (``/mcp_add <name>
<url>`` loses ``<name> <url>``). This converter handles the subset models write, never drops a
character (an unmatched marker stays as written), and is linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["Span", "render_markdown"]

_FENCE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)[^`]*$")
_HEADING: Final = re.compile(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
_QUOTE: Final = re.compile(r"^ {0,3}>\s?(.*)$")
_BULLET: Final = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_LINK: Final = re.compile(r"\[([^\[\]\n]+)\]\((https?://[^\s()]+)\)")
_ESCAPABLE: Final = frozenset("\\`*_{}[]()#+-.!~>|")
_PAIRS: Final = (("**", "bold"), ("__", "bold"), ("~~", "strikethrough"), ("*", "italic"), ("_", "italic"))


@dataclass(frozen=True, slots=True)
class Span:
    """A formatting span in Python string indices ``[start, end)``; the splitter converts to UTF-16."""

    type: str
    start: int
    end: int
    url: str | None = None
    language: str | None = None


class _Out:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.spans: list[Span] = []

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def span(self, kind: str, start: int, **extra: str | None) -> None:
        if self.size > start:
            self.spans.append(Span(kind, start, self.size, **extra))


def _closing(text: str, marker: str, start: int) -> int:
    """Where ``marker`` closes an emphasis opened just before ``start``; -1 when it does not."""
    position = start
    while True:
        found = text.find(marker, position)
        if found <= start:
            return -1
        after = found + len(marker)
        before_ok = not text[found - 1].isspace()
        # A single marker must not be half of a double one (``*a **b** c*`` closes at the last).
        double = len(marker) == 1 and (text[after : after + 1] == marker or text[found - 1] == marker)
        intraword = marker[0] == "_" and after < len(text) and text[after].isalnum()
        if before_ok and not double and not intraword:
            return found
        position = found + len(marker)


def _inline(text: str, out: _Out) -> None:
    i = 0
    plain_from = 0
    length = len(text)

    def flush(upto: int) -> None:
        if upto > plain_from:
            out.add(text[plain_from:upto])

    while i < length:
        char = text[i]
        if char == "\\" and i + 1 < length and text[i + 1] in _ESCAPABLE:
            flush(i)
            out.add(text[i + 1])
            i += 2
            plain_from = i
            continue
        if char == "`":
            run = len(text[i:]) - len(text[i:].lstrip("`"))
            ticks = "`" * run
            end = text.find(ticks, i + run)
            if end > i + run:
                flush(i)
                start = out.size
                out.add(text[i + run : end])
                out.span("code", start)
                i = end + run
                plain_from = i
                continue
            i += run
            continue
        if char == "[":
            match = _LINK.match(text, i)
            if match:
                flush(i)
                start = out.size
                out.add(match[1])
                out.span("text_link", start, url=match[2])
                i = match.end()
                plain_from = i
                continue
        if char in "*_~":
            handled = False
            for marker, kind in _PAIRS:
                if not text.startswith(marker, i):
                    continue
                inner_start = i + len(marker)
                if inner_start >= length or text[inner_start].isspace():
                    continue
                if marker[0] == "_" and i > 0 and text[i - 1].isalnum():
                    continue  # snake_case_words stay as written
                close = _closing(text, marker, inner_start)
                if close < 0:
                    continue
                flush(i)
                start = out.size
                _inline(text[inner_start:close], out)
                out.span(kind, start)
                i = close + len(marker)
                plain_from = i
                handled = True
                break
            if handled:
                continue
            # Not an emphasis here: the whole run of markers stays as written.
            run_end = i
            while run_end < length and text[run_end] == char:
                run_end += 1
            i = run_end
            continue
        i += 1
    flush(length)


def render_markdown(markdown: str) -> tuple[str, list[Span]]:
    """Telegram text and its formatting spans for ``markdown``; every visible character is kept."""
    out = _Out()
    lines = markdown.split("\n")
    index = 0
    quote_start: int | None = None
    while index < len(lines):
        line = lines[index]
        quoted = _QUOTE.match(line)
        if quoted is None and quote_start is not None:
            out.span("blockquote", quote_start)
            quote_start = None
        if index:
            out.add("\n")
        fence = _FENCE.match(line)
        if fence:
            marker, language = fence[1], fence[2]
            closing = next(
                (
                    j
                    for j in range(index + 1, len(lines))
                    if len(lines[j].strip()) >= len(marker) and not lines[j].strip().strip(marker[0])
                ),
                None,
            )
            if closing is not None:
                start = out.size
                out.add("\n".join(lines[index + 1 : closing]))
                out.span("pre", start, language=language or None)
                index = closing + 1
                continue
        heading = _HEADING.match(line)
        if heading:
            start = out.size
            _inline(heading[1], out)
            out.span("bold", start)
        elif quoted:
            if quote_start is None:
                quote_start = out.size
            _inline(quoted[1], out)
        elif bullet := _BULLET.match(line):
            out.add(f"{bullet[1]}• ")
            _inline(bullet[2], out)
        else:
            _inline(line, out)
        index += 1
    if quote_start is not None:
        out.span("blockquote", quote_start)
    return "".join(out.parts), out.spans
