"""Bounds on a turn: how long one model request may take, and stopping a running turn (``/stop``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from ..core import process_metrics

__all__ = ["ModelLimits", "RunningTurns", "key_refused"]

NOT_KEPT = "Your message was not kept in the conversation: send it again to retry."


@dataclass(frozen=True, kw_only=True)
class ModelLimits:
    """How long one model request may take, and how many attempts it may make in that time.

    The provider SDKs default to a 600 s timeout per attempt and three attempts: a hung provider
    would hold a chat for half an hour with no word to the person waiting.
    """

    timeout: float = 120.0
    """Seconds for one model request, every attempt included (``PLAYA_MODEL_TIMEOUT``)."""
    retries: int = 1
    """Retries the provider client may make within ``timeout`` (a reset connection, a 5xx)."""

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"the model timeout must be positive, got {self.timeout!r}")
        if self.retries < 0:
            raise ValueError(f"model retries cannot be negative, got {self.retries!r}")

    def settings(self) -> ModelSettings:
        # ``request_timeout`` is pydantic-ai's own deadline over all attempts and works for every
        # model; ``timeout`` and ``max_retries`` reach the provider's client, so an attempt never
        # waits longer than the whole request may.
        return {"request_timeout": self.timeout, "timeout": self.timeout, "max_retries": self.retries}

    def request_settings(self) -> ModelSettings:
        """The settings of every model request: these bounds, and prompt caching.

        ``cache`` lets pydantic-ai mark the stable prefix (tool definitions, instructions) for the
        providers that take explicit cache control (Anthropic); the others cache on their own.
        """
        return {**self.settings(), "cache": True}

    def timed_out(self) -> str:
        return f"The model did not answer within {self.timeout:g} s, so I stopped this turn. {NOT_KEPT}"


class RunningTurns:
    """The running turn of each chat, so that ``/stop`` can cancel it."""

    def __init__(self) -> None:
        self._scopes: dict[str, anyio.CancelScope] = {}

    @contextmanager
    def run(self, chat: str) -> Iterator[anyio.CancelScope]:
        """The block is the chat's running turn; its scope says whether it was stopped."""
        with anyio.CancelScope() as scope:
            self._scopes[chat] = scope
            try:
                yield scope
            finally:
                process_metrics().turn()
                if self._scopes.get(chat) is scope:
                    del self._scopes[chat]

    def stop(self, chat: str) -> bool:
        """Cancel the chat's running turn; False when none is running."""
        scope = self._scopes.get(chat)
        if scope is None:
            return False
        scope.cancel()
        return True

    def running(self, chat: str) -> bool:
        return chat in self._scopes


# The variable each provider's key comes from, by pydantic-ai's provider system name.
_KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google-gla": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "cohere": "CO_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
}


def key_refused(model: Model) -> str:
    """The reply when the provider refused the key: it names the variable to set.

    The provider's own message shows a few characters of the key it got (``api***`` when no key
    was set at all), never the variable that should have held it.
    """
    variable = _KEY_VARIABLES.get(model.system)
    where = f"check {variable}" if variable else "check the provider's API key variable"
    return f"The model's provider refused its API key: {where}."
