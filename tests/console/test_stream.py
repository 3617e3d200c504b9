"""The console in a terminal writes a turn's reply as the model writes it, through the reply's
gate: the head of a key split across the provider's pieces never reaches the screen.

``playa chat`` runs in a pseudo-terminal; its model is pydantic-ai's real OpenAI client against
the loopback provider, which streams server-sent events.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from playa.core import REDACTED
from support.provider_wire import pieces
from support.providers import serve_provider

from .test_questions import WAIT, Chat

pytestmark = pytest.mark.anyio

KEY = "sk-live-8f3KqZ2xW9vT4mNcR7pL0aYe"
BEFORE = "Your key is "
AFTER = ", keep it safe."


async def test_a_terminal_sees_the_reply_grow_and_never_a_head_of_a_split_key(tmp_path: Path) -> None:
    text = BEFORE + KEY + AFTER
    final = f"{BEFORE}{REDACTED}{AFTER}"
    async with serve_provider() as provider:
        # The host's environment holds the key: the chat's redactor knows it.
        extra = {"PLAYA_MODEL": "openai-chat:gpt-5.5", "OPENAI_BASE_URL": provider.url, "OPENAI_API_KEY": KEY}
        chat = Chat("pty")
        async with chat.running(tmp_path / "data", tmp_path / "stderr.log", extra):
            for split in (1, 3, len(KEY) // 2, len(KEY) - 1):
                mark = chat.mark()
                at = len(BEFORE) + split
                seen: list[str] = []

                async def on_screen(_: int, mark: int = mark, seen: list[str] = seen) -> None:
                    # The words before the key show before the rest of the reply is written.
                    await chat.wait_for(BEFORE.strip(), after=mark)
                    seen.append(chat.out[mark:])

                provider.script(pieces([text[:at], text[at:]], between=on_screen))
                chat.say("what is my key?")
                with anyio.fail_after(WAIT):
                    end = await chat.wait_for(AFTER, after=mark)
                assert seen and KEY[:split] not in seen[0].split(BEFORE.strip(), 1)[1], (split, seen)
                shown = chat.out[mark : end + len(AFTER)]
                assert final in shown
                assert shown.count(BEFORE.strip()) == 1  # written once, not again at the end
                assert KEY[:3] not in chat.raw
