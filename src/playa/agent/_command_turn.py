"""A command's agent turn (``CommandContext.turn``): text and media run as the sender's message."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from ..core import Media, ToolResult
from ._agent import model_content

__all__ = ["command_turn"]


class _Replied(Protocol):
    @property
    def text(self) -> str: ...


def command_turn(
    turn: Callable[..., Awaitable[_Replied]],
) -> Callable[[str, tuple[Media, ...]], Awaitable[str]]:
    """``CommandContext.turn`` of one message's turn (called as ``turn(text, prompt=…)``): the reply's text.

    The media go with the text as the person's own attachments do: the model-bound gate takes
    them as it takes every binary part.
    """

    async def run(text: str, media: tuple[Media, ...]) -> str:
        content = model_content(ToolResult(text, media=media))
        return (await turn(text, prompt=content if isinstance(content, str) else [*content])).text

    return run
