"""Where a text that is still being written could end in the start of a secret.

A reply streamed to a chat is shown while the model writes it. A redactor removes the secrets a
text holds whole; a text cut in the middle of one holds only its head, which no redactor can
tell from other text, and which must not be shown either. So a streamed text is shown only up
to :func:`held_from`: the rest waits for the text that follows it, which either completes a
secret (then redacted whole) or shows that none starts there.

Held back from the earliest of:

- a suffix of the text that is a proper prefix of one of the redactor's forms;
- with decoders (secrets looked for in base64 and hex runs), the run of hex the text ends
  in, or of base64 cut by line breaks, since it may grow into a run that holds a secret;
- and never after the start of a complete match the cut would split (a match of a longer form
  that shares its head with a shorter one).

Only the last :data:`TAIL_WINDOW` characters are looked at: a form or run that starts earlier
and is still open is longer than any the redactor looks for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Final

from ._decode import _BASE64_CLASS, _HEX_CLASS

__all__ = ["TAIL_WINDOW", "held_from"]

TAIL_WINDOW: Final = 4096
_BASE64_TAIL: Final = re.compile(f"[{_BASE64_CLASS}]*\\Z")
_HEX_TAIL: Final = re.compile(f"[{_HEX_CLASS}]*\\Z")


def _open_prefix(window: str, form: str) -> int:
    """The start of the longest suffix of ``window`` that is a proper prefix of ``form``; ``len(window)`` if none."""
    length = len(window)
    first = form[0]
    at = window.find(first, max(0, length - len(form) + 1))
    while at >= 0:
        if form.startswith(window[at:]):
            return at
        at = window.find(first, at + 1)
    return length


def _run_start(window: str) -> int:
    """Where a run that a decoder could still read, at the end of ``window``, starts.

    Any run of hex; a run of base64 only once it holds a line break or a backslash: without
    one, a decoder finds nothing the literal forms (whose heads are held already) do not.
    """
    held = len(window)
    hex_run = _HEX_TAIL.search(window)
    if hex_run is not None:
        held = hex_run.start()
    base64_run = _BASE64_TAIL.search(window)
    if base64_run is not None and any(mark in base64_run.group() for mark in "\r\n\\"):
        held = min(held, base64_run.start())
    return held


def held_from(
    text: str,
    forms: Iterable[str],
    *,
    runs: bool,
    matches: Callable[[str], list[tuple[int, int]]],
) -> int:
    """The index of ``text`` from which it could still become a secret; ``len(text)`` when nowhere.

    ``forms`` are the redactor's literal forms, ``runs`` whether it decodes runs, and
    ``matches`` the (start, end) of every complete match in a text.
    """
    start = max(0, len(text) - TAIL_WINDOW)
    window = text[start:]
    held = len(window)
    for form in forms:
        held = min(held, _open_prefix(window, form))
    if runs:
        held = min(held, _run_start(window))
    spans = matches(window)
    moved = True
    while moved:
        moved = False
        for begin, end in spans:
            if begin < held < end:
                held, moved = begin, True
    return start + held
