"""The chat history on disk: append-only JSON lines, torn lines, migration, reset."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse, TextPart

from playa.agent import HISTORY_FILE, History, _history
from support.chat import Script, ScriptedUI, msg
from support.host import new_host

pytestmark = pytest.mark.anyio


def turn(n: int) -> list[ModelMessage]:
    return [ModelRequest.user_text_prompt(f"question {n}"), ModelResponse(parts=[TextPart(f"answer {n}")])]


def texts(history: History) -> list[str]:
    return [str(part.content) for message in history.messages for part in message.parts]  # type: ignore[union-attr]


async def test_each_turn_appends_its_messages_one_per_line_and_leaves_earlier_bytes_alone(
    tmp_path: Path,
) -> None:
    history = await History.open(tmp_path)
    await history.extend(turn(1))
    first = history.path.read_bytes()
    await history.extend(turn(2))
    data = history.path.read_bytes()
    assert history.path.name == HISTORY_FILE
    assert data.startswith(first)
    lines = data.splitlines()
    assert len(lines) == 4
    assert [json.loads(line)["kind"] for line in lines] == ["request", "response"] * 2
    reopened = await History.open(tmp_path)
    assert texts(reopened) == ["question 1", "answer 1", "question 2", "answer 2"]


async def test_a_torn_last_line_is_dropped_and_the_next_turn_appends_cleanly(tmp_path: Path) -> None:
    history = await History.open(tmp_path)
    await history.extend(turn(1))
    whole = history.path.read_bytes()
    with history.path.open("ab") as file:
        file.write(b'{"kind":"request","parts":[{"part_kind":"user-pro')  # a crash mid-append
    reopened = await History.open(tmp_path)
    assert texts(reopened) == ["question 1", "answer 1"]
    assert history.path.read_bytes() == whole
    await reopened.extend(turn(2))
    assert texts(await History.open(tmp_path)) == ["question 1", "answer 1", "question 2", "answer 2"]


async def test_a_history_broken_before_its_last_line_is_moved_aside_not_deleted(tmp_path: Path) -> None:
    history = await History.open(tmp_path)
    await history.extend(turn(1))
    lines = history.path.read_bytes().splitlines(keepends=True)
    broken = lines[0] + b"not json\n" + lines[1]
    history.path.write_bytes(broken)
    reopened = await History.open(tmp_path)
    assert reopened.messages == []
    (aside,) = [name for name in os.listdir(tmp_path) if name.startswith(f"{HISTORY_FILE}.unreadable-")]
    assert (tmp_path / aside).read_bytes() == broken


async def test_a_history_of_the_old_single_json_format_is_migrated(tmp_path: Path) -> None:
    old = tmp_path / "history.json"
    old.write_bytes(ModelMessagesTypeAdapter.dump_json(turn(1) + turn(2)))
    history = await History.open(tmp_path)
    assert texts(history) == ["question 1", "answer 1", "question 2", "answer 2"]
    assert not old.exists()
    assert len(history.path.read_bytes().splitlines()) == 4
    await history.extend(turn(3))
    assert len(texts(await History.open(tmp_path))) == 6


async def test_clear_leaves_an_empty_file_and_later_turns_start_from_it(tmp_path: Path) -> None:
    history = await History.open(tmp_path)
    await history.extend(turn(1))
    await history.clear()
    assert history.messages == []
    assert history.path.read_bytes() == b""
    await history.extend(turn(2))
    assert texts(await History.open(tmp_path)) == ["question 2", "answer 2"]


async def test_a_history_that_cannot_be_written_keeps_the_turn_and_says_so(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    script = Script([lambda m, i: ModelResponse(parts=[TextPart("the answer")])])
    async with new_host(data_dir, script) as host:
        session = await host.session("console:t", owner="owner")
        # A folder where the file should be: the append fails with EISDIR.
        host.history(session).path.mkdir(parents=True)
        with anyio.fail_after(10):
            reply = await host.handle(session, msg("hello"), ScriptedUI())
    assert reply is not None and reply.kind == "agent"
    assert reply.text.startswith("the answer\n\n(This turn could not be saved to the chat's history")
    assert len(host.history(session).messages) == 2


async def test_reset_forgets_the_conversation_on_disk_too(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    async with new_host(data_dir) as host:
        session = await host.session("console:t", owner="owner")
        await host.handle(session, msg("remember PINEAPPLE"), ScriptedUI())
        assert b"PINEAPPLE" in host.history(session).path.read_bytes()
        reply = await host.handle(session, msg("/reset"), ScriptedUI())
        assert reply is not None and reply.text == "This chat's conversation is forgotten."
        assert host.history(session).path.read_bytes() == b""
    async with new_host(data_dir) as host:
        session = await host.session("console:t", owner="owner")
        assert host.history(session).messages == []


async def test_appending_clearing_and_opening_touch_the_disk_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write or an fsync on the event loop would stall every other chat of the host.
    loop_thread = threading.get_ident()
    touched: list[tuple[str, int]] = []

    def recorded(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            touched.append((name, threading.get_ident()))
            return real(*args, **kwargs)

        return call

    for name in ("append_durably", "atomic_write", "_load"):
        monkeypatch.setattr(_history, name, recorded(name, getattr(_history, name)))
    history = await History.open(tmp_path)
    await history.extend(turn(1))
    await history.clear()
    assert [name for name, _ in touched] == ["_load", "append_durably", "atomic_write"]
    assert all(thread != loop_thread for _, thread in touched)
