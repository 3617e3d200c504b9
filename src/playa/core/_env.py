"""The environment deny-list: variables that never reach the agent, its processes or a prompt."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from .secrets import MIN_SECRET_LENGTH

__all__ = ["DEFAULT_DENIED", "EnvPolicy"]

DEFAULT_DENIED: frozenset[str] = frozenset(
    {
        "MCP_ENCRYPTION_SECRET",
        "PLAYA_DATABASE_URL",
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


class EnvPolicy:
    """Which environment variables the agent may never see: not in a prompt, a reply or a log.

    ``extra`` adds operator names (``PLAYA_ENV_DENY``, comma separated). Names ending in
    ``*`` deny by prefix. The host redacts the denied variables' values with every chat's
    credentials, through its one redactor. (The agent starts no process; one that it started
    would get the environment without the variables ``denies`` names.)
    """

    def __init__(self, extra: Iterable[str] = (), *, environ: Mapping[str, str] | None = None) -> None:
        names = {name.strip() for name in extra if name.strip()}
        self._exact = frozenset(DEFAULT_DENIED | {n for n in names if not n.endswith("*")})
        self._prefixes = tuple(n[:-1] for n in names if n.endswith("*"))
        environ = os.environ if environ is None else environ
        # Read once: the host's environment is fixed once it runs. Shorter values are too
        # likely to be ordinary words, and the redactor would not take them.
        self._values = frozenset(
            v for n, v in environ.items() if self.denies(n) and len(v) >= MIN_SECRET_LENGTH
        )

    def denies(self, name: str) -> bool:
        return name in self._exact or (bool(self._prefixes) and name.startswith(self._prefixes))

    def denied_values(self) -> frozenset[str]:
        """The values of denied variables that were set when the policy was made."""
        return self._values
