"""What a front end was shown of a long tool call's progress."""

from __future__ import annotations

from support.chat import ScriptedUI


async def progress_done(ui: ScriptedUI) -> None:
    """Returns once ``ui`` was shown that a tool call is done (a progress line ``<tool>: done``)."""
    await ui.until(lambda seen: any(text.endswith(": done") for _, text in seen.progress_shown))
