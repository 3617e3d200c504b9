"""A turn's reply as the model writes it: what a front end may show of it at any moment.

The model's text arrives in pieces (pydantic-ai's stream events). Every version a front end
shows passes the gate the final reply passes, the chat's redactor, and a tail that could be the
head of a secret is held back until the text that follows shows it is not one
(``Redactor.held_from``): a key split across pieces, at any position, never shows.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Callable
from typing import Any, Protocol

from pydantic_ai import RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import FunctionModel

from ..core import Redactor

__all__ = ["LiveReply", "ReplyStream", "can_stream"]

logger = logging.getLogger(__name__)


class LiveReply(Protocol):
    """A front end's place that shows a turn while it runs (a Telegram draft or edited message,
    the console's line)."""

    def changed(self, stream: ReplyStream) -> None:
        """``stream`` has something new to show. Called on the turn's path: it must not block;
        the front end reads ``stream.text()`` and ``stream.running`` when it is ready to show them."""
        ...


class ReplyStream:
    """The reply of one turn as it is written, gated; its events come from pydantic-ai's run.

    A turn may make several model requests (text, a tool call, more text): ``step`` counts the
    responses that wrote text, and ``text`` is the latest one's, which is what the reply will be.
    """

    def __init__(self, redactor: Callable[[], Redactor], live: LiveReply) -> None:
        self._redactor = redactor
        self._live = live
        self.step = 0
        self._parts: dict[int, str] = {}
        self._new_response = False
        self._shown: tuple[int, int, str] = (0, 0, "")
        """The step, raw length and gated text of the last ``text()``: a front end may ask twice."""
        self.running: dict[str, str] = {}
        """The tools running now, by call id: their names."""

    def raw_length(self) -> int:
        return sum(len(part) for part in self._parts.values())

    def text(self) -> str:
        """The latest response's text as far as it may be shown: redacted, its open tail held back."""
        raw = "\n\n".join(part for _, part in sorted(self._parts.items()))
        if self._shown[:2] == (self.step, len(raw)):
            return self._shown[2]
        try:
            redactor = self._redactor()
            shown = redactor.redact(raw[: redactor.held_from(raw)])
        except Exception as exc:  # boundary: a failing filter shows nothing, never the raw text
            logger.error("the stream's filter failed: %s", type(exc).__name__)
            shown = ""
        self._shown = (self.step, len(raw), shown)
        return shown

    async def handle(self, ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        """pydantic-ai's ``event_stream_handler``: called once per model response and per tool batch."""
        self._new_response = True
        async for event in events:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                self._add(event.index, event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                self._add(event.index, event.delta.content_delta)
            elif isinstance(event, FunctionToolCallEvent):
                self.running[event.part.tool_call_id] = event.part.tool_name
                self._live.changed(self)
            elif isinstance(event, FunctionToolResultEvent):
                self.running.pop(event.tool_call_id, None)
                self._live.changed(self)

    def _add(self, index: int, piece: str) -> None:
        if self._new_response:
            # A new response: what the reply will be starts again.
            self._new_response = False
            self.step += 1
            self._parts = {}
        self._parts[index] = self._parts.get(index, "") + piece
        if piece:
            self._live.changed(self)


def can_stream(model: Model) -> bool:
    """Whether ``model`` answers in pieces: a function model does only with a stream function
    (the offline model and the tests' scripted ones do not)."""
    return not (isinstance(model, FunctionModel) and model.stream_function is None)
