"""A secret answer that is a PEM block (a private key): read whole, hidden, up to its last line.

Pasted at a hidden prompt, a key arrives as many lines; a question that took only the first would
leave the rest in the input, where each would become a chat message to the model.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

__all__ = ["MAX_PEM_BYTES", "MAX_PEM_LINES", "TOO_LONG", "whole_answer"]

MAX_PEM_LINES: Final = 200
MAX_PEM_BYTES: Final = 64 * 1024
TOO_LONG: Final = (
    f"That key is longer than {MAX_PEM_LINES} lines or {MAX_PEM_BYTES // 1024} KiB: nothing of it was kept. "
    "Send the key file's PEM block alone."
)
_BEGIN: Final = re.compile(r"-----BEGIN [A-Z0-9 ]+-----")
_END: Final = re.compile(r"-----END [A-Z0-9 ]+-----")


class _Lines(Protocol):
    raw: bool

    async def next(self) -> str | None: ...


async def whole_answer(asked: _Lines, first: str, say: Callable[[str], Awaitable[object]]) -> str | None:
    """``first``, or, when it begins a PEM block, the block up to its END line, lines joined by ``\\n``.

    ``None`` when the input ended or the question was cancelled before the END line, or the block
    outgrew :data:`MAX_PEM_LINES` / :data:`MAX_PEM_BYTES` (then ``say`` tells why). Meanwhile
    every line is the block's, not a command: a base64 line may well begin with ``/``.
    """
    if _BEGIN.fullmatch(first) is None:
        return first
    lines = [first]
    size = len(first) + 1
    asked.raw = True
    try:
        while (line := await asked.next()) is not None:
            line = line.strip()
            lines.append(line)
            size += len(line.encode()) + 1
            if len(lines) > MAX_PEM_LINES or size > MAX_PEM_BYTES:
                lines.clear()
                await say(TOO_LONG)
                return None
            if _END.fullmatch(line) is not None:
                return "\n".join(lines)
        lines.clear()
        return None
    finally:
        asked.raw = False
