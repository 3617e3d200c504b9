"""Replies on their way out: split below the limit, formatted or plain, flood control and server
errors waited out; against the fake Bot API."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from playa.telegram import Journal, build_bot, utf16_len
from playa.telegram._outbox import Outbox
from playa.telegram._render import plain
from servers.python_servers import serve_asgi
from support.telegram import TOKEN, demo_added, running_bot

from .fake_bot_api import FakeBotApi, private_chat, user

pytestmark = pytest.mark.anyio


async def test_a_long_reply_is_split_below_the_limit_in_utf16_units(tmp_path: Path) -> None:
    line = "😀 émoji line" * 20  # 260 characters, 280 UTF-16 units
    long_line = "🎉" * 2100 + "end"  # 4203 units on one line: it must be cut hard
    text = "\n".join([line] * 20 + [long_line] + [line] * 5)
    assert utf16_len(text) > 2 * 4096
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        await demo_added(bot, 901)
        mark = fake.mark()
        fake.send(private_chat(901), "demo__echo " + json.dumps({"text": text}), sender=user(901))

        def parts_so_far() -> list[str]:
            return [c.text for c in fake.find("sendMessage", after=mark, chat_id=901)]

        flat = text.replace("\n", "")
        await fake.wait_call(
            "sendMessage",
            after=mark,
            chat_id=901,
            where=lambda _: "".join(parts_so_far()).replace("\n", "").endswith(flat),
        )
        parts = parts_so_far()
    assert len(parts) >= 3
    assert all(utf16_len(part) <= 4096 for part in parts)
    # Cut where the next line would not fit, and a line longer than the limit cut hard at it.
    assert utf16_len(parts[0]) + 1 + utf16_len(line) > 4096
    assert 4096 in [utf16_len(part) for part in parts]
    joined = "".join(parts).replace("\n", "")
    assert joined == "[offline model] demo__echo returned:" + flat
    assert "\ufffd" not in joined


async def test_flood_control_is_waited_out_and_the_message_sent_again(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        fake.retry_after["sendMessage"] = 1
        fake.send(private_chat(1001), "/help", sender=user(1001))
        sent = await fake.wait_reply(1001, "Commands:")
        attempts = fake.find("sendMessage", chat_id=1001)
    assert [a.status for a in attempts] == [429, 200]
    assert attempts[0].text == sent.text
    assert sent.at - attempts[0].at >= 0.9


async def test_agent_replies_carry_telegram_formatting_and_fall_back_to_plain_text_when_refused(
    tmp_path: Path,
) -> None:
    markdown = "**Done** with `code` and [docs](https://example.org/docs)"
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        await demo_added(bot, 1401)
        mark = fake.mark()
        fake.send(private_chat(1401), "demo__echo " + json.dumps({"text": markdown}), sender=user(1401))
        reply = await fake.wait_reply(1401, "Done with code and docs", after=mark)
        entities = {(e["type"], e.get("url")) for e in reply.params["entities"]}
        assert {("bold", None), ("code", None), ("text_link", "https://example.org/docs")} <= entities
        assert "**" not in reply.text

        # Command replies stay plain.
        mark = fake.mark()
        fake.send(private_chat(1401), "/help", sender=user(1401))
        helped = await fake.wait_reply(1401, "Commands:", after=mark)
        assert not helped.params.get("entities")

        fake.reject_entities = True
        mark = fake.mark()
        fake.send(private_chat(1401), "demo__echo " + json.dumps({"text": markdown}), sender=user(1401))
        plain = await fake.wait_reply(1401, "Done with code and docs", after=mark)
        assert not plain.params.get("entities")
        assert [c.status for c in fake.find("sendMessage", after=mark, chat_id=1401)] == [400, 200]


async def test_server_errors_are_retried_with_backoff_and_the_reply_arrives_once(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        fake.server_errors["sendMessage"] = 2
        fake.send(private_chat(1501), "/help", sender=user(1501))
        await fake.wait_reply(1501, "Commands:")
        attempts = fake.find("sendMessage", chat_id=1501)
    assert [a.status for a in attempts] == [502, 502, 200]
    assert attempts[2].at - attempts[1].at >= 1.9  # the second wait doubled the first (1 s)


async def test_a_discarded_reply_leaves_the_journal_and_is_never_sent_not_even_after_a_restart(
    tmp_path: Path,
) -> None:
    fake = FakeBotApi(TOKEN)
    async with serve_asgi(fake.app()) as api:
        bot = build_bot(TOKEN, base_url=api.url)
        async with bot, anyio.create_task_group() as tg:
            journal = Journal.for_bot(tmp_path, TOKEN, "outbox")
            outbox = Outbox(bot, journal=journal)
            kept = await outbox.post(1001, plain("kept"))
            dropped = await outbox.post(1001, plain("dropped"))
            assert [name for name, _ in await journal.load()] == [kept.name, dropped.name]
            await outbox.discard(dropped)
            assert [name for name, _ in await journal.load()] == [kept.name]
            # A restart resumes what the journal holds: the kept reply alone.
            resumed = await Outbox(bot, journal=journal).resume(tg)
            assert [delivery.name for delivery in resumed] == [kept.name]
            with anyio.fail_after(30):
                await fake.wait_call("sendMessage", chat_id=1001, text="kept")
    assert [call.text for call in fake.find("sendMessage", chat_id=1001)] == ["kept"]
