"""A chat's history in PostgreSQL rows behaves as the history file does."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart

from playa.agent import History
from playa.db import Database, DatabaseStorage, upgrade

pytestmark = pytest.mark.anyio

SCOPE = "telegram:123"


def turn(n: int) -> list[ModelMessage]:
    return [ModelRequest.user_text_prompt(f"question {n}"), ModelResponse(parts=[TextPart(f"answer {n}")])]


def texts(history: History) -> list[str]:
    return [str(part.content) for message in history.messages for part in message.parts]  # type: ignore[union-attr]


async def test_turns_are_kept_in_order_per_chat_and_survive_a_reopen(database: Database) -> None:
    await upgrade(database)
    rows = DatabaseStorage(database).history
    history = await History.open_rows(rows, SCOPE)
    other = await History.open_rows(rows, "telegram:456")
    await history.extend(turn(1))
    await other.extend(turn(9))
    await history.extend(turn(2))
    assert history.path is None
    reopened = await History.open_rows(rows, SCOPE)
    assert texts(reopened) == ["question 1", "answer 1", "question 2", "answer 2"]
    assert reopened.sized()[1] == history.sized()[1]  # the same sizes as when first kept
    assert texts(await History.open_rows(rows, "telegram:456")) == ["question 9", "answer 9"]


async def test_a_cleared_history_stays_empty_and_a_bad_row_is_skipped(database: Database) -> None:
    await upgrade(database)
    rows = DatabaseStorage(database).history
    history = await History.open_rows(rows, SCOPE)
    await history.extend(turn(1))
    await history.clear()
    assert len(await History.open_rows(rows, SCOPE)) == 0
    await history.extend(turn(2))
    async with database.connection() as c:
        await c.execute("INSERT INTO history (chat, seq, message) VALUES ($1, 99, $2)", SCOPE, b"{not json")
    assert texts(await History.open_rows(rows, SCOPE)) == ["question 2", "answer 2"]
