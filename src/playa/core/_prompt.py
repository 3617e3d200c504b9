"""Named prompt sections that extensions set and the agent's instructions are composed of."""

from __future__ import annotations

__all__ = ["PromptSections"]


class PromptSections:
    """Sections of a chat's instructions, rendered on every turn in a stable order.

    The order is (``order``, title): it does not depend on which extension ran first, so the
    instructions of two turns with the same sections are identical (good for prompt caches).
    """

    def __init__(self) -> None:
        self._sections: dict[str, tuple[int, str]] = {}

    def set(self, title: str, text: str | None, *, order: int = 100) -> None:
        """Set a section's text; ``None`` or blank removes it."""
        if text is None or not text.strip():
            self._sections.pop(title, None)
        else:
            self._sections[title] = (order, text.strip())

    def get(self, title: str) -> str | None:
        entry = self._sections.get(title)
        return entry[1] if entry else None

    def render(self) -> str:
        return "\n\n".join(f"## {title}\n{text}" for title, (_, text) in self._ordered())

    def _ordered(self) -> list[tuple[str, tuple[int, str]]]:
        return sorted(self._sections.items(), key=lambda item: (item[1][0], item[0]))
