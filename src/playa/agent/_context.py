"""What of a chat's history the model is sent: the latest whole turns that fit its context.

The stored history keeps every turn; a long chat would pass the model's context window, and
from then on every turn would fail. So each turn sends only the latest turns that fit what is
left of the window once the instructions, the tool definitions, the new message and room for
the answer are counted, with a note where older turns were left out. Turns are kept or left
out whole, so a tool call always arrives with its result.

This runs before ``Agent.run``, not as a history processor: pydantic-ai does per-request work
over the whole ``message_history`` before processors run, and a turn's cost must not grow with
the history. Each message's size is counted once, when the history stores or loads it, so
picking the window walks back over the kept turns only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.tools import ToolDefinition

from ..exceptions import ConfigError

__all__ = [
    "BYTES_PER_TOKEN",
    "ContextBudget",
    "Window",
    "definition_tokens",
    "estimate_tokens",
    "latest_turns",
]

BYTES_PER_TOKEN: Final = 3
"""Bytes counted as one token. Tokenizers make about four bytes of English, or of JSON, a token;
three overestimates every provider's count, so an estimate never lets a request overflow."""

DEFAULT_CONTEXT_TOKENS: Final = 32_000
"""The budget of a model whose window is unknown (a local model behind an OpenAI-compatible URL)."""

_MIN_TOKENS: Final = 1_000
_PER_PART_BYTES: Final = 48
"""The JSON around one part on the wire (``{"role": "tool", "tool_call_id": "…", "content": …}``)."""
_NOT_SENT: Final = frozenset(
    {
        "timestamp",
        "part_kind",
        "provider_name",
        "provider_details",
        "provider_response_id",
        "metadata",
        "usage",
    }
)
_PER_TOOL_TOKENS: Final = 16
"""The wrapping each provider puts around a definition (``{"type": "function", "function": …}``)."""


def message_bytes(message: ModelMessage) -> int:
    """The bytes of what ``message`` gives the model: every string and number of its parts
    (binary data as base64), and room for the wrapping each part gets on the wire.

    Not the stored JSON: its timestamps, kinds and ids are four times the text of a short turn,
    and counting them would leave most of a context unused.
    """
    return sum(_PER_PART_BYTES + _content_bytes(part, 0) for part in message.parts)


def _content_bytes(value: object, depth: int) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes):
        return -(-len(value) // 3) * 4
    if value is None or isinstance(value, bool) or depth > 32:
        return 0
    if isinstance(value, int | float):
        return 8
    if isinstance(value, Mapping):
        return sum(_content_bytes(k, depth + 1) + _content_bytes(v, depth + 1) + 4 for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_content_bytes(item, depth + 1) + 2 for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(
            _content_bytes(getattr(value, f.name, None), depth + 1)
            for f in dataclasses.fields(value)
            if f.name not in _NOT_SENT
        )
    return 0


def estimate_tokens(text: str | bytes) -> int:
    """An upper estimate of the tokens ``text`` takes (see :data:`BYTES_PER_TOKEN`)."""
    size = len(text.encode() if isinstance(text, str) else text)
    return -(-size // BYTES_PER_TOKEN)


def definition_tokens(definitions: Iterable[ToolDefinition]) -> int:
    """An upper estimate of the tokens tool definitions take in the model's context (deferred
    ones are not there until found)."""
    return sum(
        estimate_tokens(
            json.dumps(
                [d.name, d.description, d.parameters_json_schema], ensure_ascii=False, separators=(",", ":")
            )
        )
        + _PER_TOOL_TOKENS
        for d in definitions
        if not d.defer_loading
    )


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """The tokens one request may hold, and how they are shared."""

    tokens: int
    """The whole request: instructions, tool definitions, history, the new message."""

    def __post_init__(self) -> None:
        if self.tokens < _MIN_TOKENS:
            raise ConfigError(
                f"the context budget must be at least {_MIN_TOKENS:,} tokens, got {self.tokens!r}"
            )

    @classmethod
    def for_model(cls, model: Model, configured: int | None = None) -> ContextBudget:
        """The budget of ``model``: its known context window (pydantic-ai's profile, which also
        looks the model up in genai-prices' table), capped by ``configured``
        (``PLAYA_CONTEXT_TOKENS``); either alone when the other is unknown, else
        :data:`DEFAULT_CONTEXT_TOKENS`.

        Capped rather than overridden: a setting larger than the window would overflow it.
        """
        known = model.context_window
        windows = [w for w in (known, configured) if w is not None and w > 0]
        return cls(min(windows) if windows else DEFAULT_CONTEXT_TOKENS)

    @property
    def answer_tokens(self) -> int:
        """Kept free for the model's answer."""
        return min(self.tokens // 4, 16_000)

    def history_tokens(self, fixed_tokens: int) -> int:
        """What the history may take once ``fixed_tokens`` (instructions, tools, the new message)
        and the answer are counted. A quarter of the rest stays free for the turn's own tool
        calls and results."""
        return max(0, (self.tokens - self.answer_tokens - fixed_tokens) * 3 // 4)


@dataclass(frozen=True, slots=True)
class Window:
    """The part of a history sent with one turn."""

    messages: list[ModelMessage]
    left_out: int
    """How many of the oldest stored messages are not sent."""


def left_out_note(count: int) -> str:
    return (
        f"[Earlier conversation left out: {count:,} older messages of this chat are not shown here, "
        "to fit the model's context. Ask the person if you need something from them.]"
    )


def _starts_turn(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts)


def latest_turns(messages: Sequence[ModelMessage], sizes: Sequence[int], max_tokens: int) -> Window:
    """The latest whole turns of ``messages`` whose ``sizes`` (:func:`message_bytes`) fit ``max_tokens``.

    A turn starts at a request that carries the person's message and runs to the next one, so
    its tool calls and their results stay together. When older turns are left out, the first
    kept message carries a note that says so (a copy: the stored message is not changed).
    """
    if len(messages) != len(sizes):
        raise ValueError(f"{len(messages)} messages but {len(sizes)} sizes")
    budget = max_tokens * BYTES_PER_TOKEN
    start = len(messages)
    used = 0
    turn = 0
    for index in range(len(messages) - 1, -1, -1):
        turn += sizes[index]
        if not _starts_turn(messages[index]):
            continue
        if used + turn > budget:
            break
        used += turn
        turn = 0
        start = index
    else:
        # Messages before the first turn's start (none in a history Playa wrote) go with it.
        if start != len(messages) and used + turn <= budget:
            start = 0
    kept = list(messages[start:])
    if start == 0:
        return Window(kept, 0)
    note = UserPromptPart(left_out_note(start))
    if not kept:
        return Window([ModelRequest(parts=[note])], start)
    first = kept[0]
    assert isinstance(first, ModelRequest)
    kept[0] = dataclasses.replace(first, parts=[note, *first.parts])
    return Window(kept, start)
