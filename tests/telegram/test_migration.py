"""A group upgraded to a supergroup: its servers, history and workspace move along, and a question
waiting in it is answered or asked again in the supergroup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.asking import bot_with_asking_server, edited, files_holding, form_shown, press
from support.telegram import DEMO_TOKEN, OWNER_ANSWER_PROMPT, running_bot, sent_texts

from .fake_bot_api import basic_group, creator, group_chat, migration, upgraded, user

pytestmark = pytest.mark.anyio


async def test_a_group_upgraded_to_a_supergroup_keeps_its_servers_history_and_workspace(
    tmp_path: Path,
) -> None:
    old_id, new_id = -4001, -1004001
    old, new = basic_group(old_id), group_chat(new_id)
    owner = user(901)
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        fake.administrators[old_id] = fake.administrators[new_id] = [creator(owner)]
        fake.send(old, f"/mcp_add demo {bot.mcp_url} --bearer {DEMO_TOKEN}", sender=owner)
        await fake.wait_reply(old_id, "Added demo")
        fake.send(old, "demo__whoami", sender=owner)
        await fake.wait_reply(old_id, "demo__whoami returned")
        old_session = await bot.host.session(f"telegram:{old_id}", owner="901")
        (old_session.workspace / "notes.txt").write_text("kept")
        history = len(bot.host.history(old_session))
        assert history > 0

        mark = fake.mark()
        upgraded(fake, old, new, owner)
        fake.send(new, "/mcp_list", sender=owner)
        told = await fake.wait_reply(new_id, "is now a supergroup", after=mark)
        assert "came along" in told.text
        listed = await fake.wait_reply(new_id, "demo:", after=mark)
        # The servers followed, re-sealed for the new id: none failing verification.
        assert listed.text.startswith("demo: connect")  # connecting or connected
        assert "ignored" not in listed.text
        assert listed.at > told.at

        mark = fake.mark()
        fake.send(new, "demo__whoami", sender=owner)
        called = await fake.wait_reply(new_id, "demo__whoami returned", after=mark)
        assert "[redacted]" in called.text

        session = await bot.host.session(f"telegram:{new_id}", owner="901")
        assert (session.workspace / "notes.txt").read_text() == "kept"
        assert len(bot.host.history(session)) > history  # the old turns, and the new one
        # The old id holds nothing any more.
        assert not old_session.workspace.exists()
        assert not bot.host.history(old_session).path.exists()

    # Told once, though Telegram said it twice.
    assert len([t for t in fake.texts(new_id) if "is now a supergroup" in t]) == 1
    assert not [t for t in fake.texts(old_id) if "supergroup" in t]
    assert all(DEMO_TOKEN not in text for text in sent_texts(fake))


async def test_a_secret_question_waiting_when_the_group_is_upgraded_is_answered_in_the_supergroup(
    tmp_path: Path,
) -> None:
    old_id, new_id = -4101, -1004101
    old, new = basic_group(old_id), group_chat(new_id)
    owner = user(4101)
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        fake.privacy_mode = True
        fake.administrators[old_id] = fake.administrators[new_id] = [creator(owner)]
        fake.send(old, f"/mcp_add demo {bot.mcp_url} --bearer", sender=owner)
        first = await fake.wait_reply(old_id, OWNER_ANSWER_PROMPT)

        mark = fake.mark()
        upgraded(fake, old, new, owner)
        asked = await fake.wait_reply(new_id, "asked again here", after=mark)
        assert OWNER_ANSWER_PROMPT in asked.text
        # Nothing of the asker's is in the new chat to reply to, so the reply is forced on everyone.
        assert asked.params["reply_markup"]["force_reply"] is True
        assert "reply_parameters" not in asked.params
        await fake.wait_reply(new_id, "Press Cancel", after=mark)

        answer = fake.send(new, DEMO_TOKEN, sender=owner, reply_to=asked)
        await fake.wait_call("deleteMessage", after=mark, chat_id=new_id, message_id=answer)
        added = await fake.wait_reply(new_id, "Added demo", after=mark)
        assert "demo__whoami" in added.text
        await fake.wait_reply(new_id, "is now a supergroup, with a new chat id", after=mark)
        fake.send(new, "/mcp_list", sender=owner)
        listed = await fake.wait_reply(new_id, "demo:", after=mark)
        assert "ignored" not in listed.text
        assert first.result_id is not None

    assert all(DEMO_TOKEN not in call.text for call in fake.calls)
    assert files_holding(tmp_path, DEMO_TOKEN) == []


async def test_a_server_question_waiting_when_the_group_is_upgraded_is_asked_again_in_the_supergroup(
    tmp_path: Path,
) -> None:
    old_id, new_id = -4201, -1004201
    old, new = basic_group(old_id), group_chat(new_id)
    owner, member = user(4201), user(4202)
    async with bot_with_asking_server(tmp_path, old, 4201) as bot:
        fake = bot.fake
        fake.administrators[new_id] = [creator(owner)]
        mark = fake.mark()
        shown = await form_shown(fake, old, member, after=mark)
        press(fake, shown, "☐ Subscribe", sender=member)
        await edited(fake, shown, "• Subscribe: yes", after=mark)

        mark = fake.mark()
        migration(fake, old, owner, to=new_id)
        again = await fake.wait_reply(new_id, "asked again here", after=mark)
        assert "• Subscribe: yes" in again.text  # what was filled in came along
        press(fake, again, "✎ Name: required, not given", sender=member)
        prompt = await fake.wait_reply(new_id, "Reply with Name", after=mark)
        fake.send(new, "Ada", sender=member, reply_to=prompt)
        again = await edited(fake, again, "• Name: Ada", after=mark)
        press(fake, again, "Accept", sender=member)
        result = await fake.wait_reply(new_id, "asking__form returned", after=mark)
    content = json.loads(result.text.split("answered: ", 1)[1])
    assert content["content"] == {"name": "Ada", "colour": "green", "subscribe": True, "age": 30}
