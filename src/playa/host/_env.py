"""The environment deny-list: variables that never reach the agent, its processes or a prompt."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = ["DEFAULT_DENIED", "EnvPolicy"]

DEFAULT_DENIED: frozenset[str] = frozenset(
    {
        "MCP_ENCRYPTION_SECRET",
        "TELEGRAM_BOT_TOKEN",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GROQ_API_KEY",
        "MISTRAL_API_KEY",
        "CO_API_KEY",
        "COHERE_API_KEY",
        "DEEPSEEK_API_KEY",
        "OPENROUTER_API_KEY",
        "XAI_API_KEY",
        "GROK_API_KEY",
        "HF_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AZURE_OPENAI_API_KEY",
        "TOGETHER_API_KEY",
        "FIREWORKS_API_KEY",
        "CEREBRAS_API_KEY",
        "LOGFIRE_TOKEN",
    }
)
"""Denied by default: the host's secrets and the model providers' API keys."""

_MIN_SCRUB = 8  # shorter values are too likely to be ordinary words in a prompt


class EnvPolicy:
    """Which environment variables the agent may see.

    ``extra`` adds operator names (``PLAYA_ENV_DENY``, comma separated). Names ending in
    ``*`` deny by prefix.
    """

    def __init__(self, extra: Iterable[str] = (), *, environ: Mapping[str, str] | None = None) -> None:
        names = {name.strip() for name in extra if name.strip()}
        self._exact = frozenset(DEFAULT_DENIED | {n for n in names if not n.endswith("*")})
        self._prefixes = tuple(n[:-1] for n in names if n.endswith("*"))
        self._environ = os.environ if environ is None else environ
        # Read once: scrub_text runs on every prompt and reply, and the host's environment is
        # fixed once it runs.
        values = {v for n, v in self._environ.items() if self.denies(n) and len(v) >= _MIN_SCRUB}
        self._values = sorted(values, key=len, reverse=True)

    def denies(self, name: str) -> bool:
        return name in self._exact or (bool(self._prefixes) and name.startswith(self._prefixes))

    def scrubbed(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """A copy of the environment without the denied variables, for processes the host starts."""
        source = self._environ if environ is None else environ
        return {name: value for name, value in source.items() if not self.denies(name)}

    def denied_values(self) -> list[str]:
        """The values of denied variables that were set when the policy was made, longest first."""
        return list(self._values)

    def scrub_text(self, text: str) -> str:
        """Remove denied values from text that is about to become part of a prompt."""
        for value in self._values:
            text = text.replace(value, "[redacted]")
        return text
