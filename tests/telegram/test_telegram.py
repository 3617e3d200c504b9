"""The Telegram front end, run for real against a fake Bot API and a real MCP server on loopback."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from support import canary
from support.providers import hang, serve_provider, text
from support.telegram import DEMO_TOKEN, OWNER_ANSWER_PROMPT, TOKEN, demo_added, running_bot, sent_texts

from .fake_bot_api import ANONYMOUS_ADMIN, creator, group_chat, owned_group, private_chat, user

pytestmark = pytest.mark.anyio


async def test_a_private_chat_adds_a_server_through_a_secret_question_and_calls_its_tool(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with running_bot(tmp_path) as bot:
        fake, chat = bot.fake, private_chat(101)
        commands = await fake.wait_call("setMyCommands")
        assert {"mcp_add", "mcp_list", "help"} <= {c["command"] for c in commands.params["commands"]}

        fake.send(chat, f"/mcp_add demo {bot.mcp_url} --bearer", sender=user(101))
        question = await fake.wait_reply(101, OWNER_ANSWER_PROMPT)
        [[cancel]] = question.params["reply_markup"]["inline_keyboard"]
        assert cancel["text"] == "Cancel"
        assert DEMO_TOKEN not in cancel["callback_data"]

        mark = fake.mark()
        answer_id = fake.send(chat, DEMO_TOKEN, sender=user(101))
        await fake.wait_call("deleteMessage", after=mark, chat_id=101, message_id=answer_id)
        added = await fake.wait_reply(101, "Added demo", after=mark)
        assert "demo__whoami" in added.text

        mark = fake.mark()
        fake.send(chat, "demo__whoami", sender=user(101))
        reply = await fake.wait_reply(101, "demo__whoami returned", after=mark)
        assert "authorization" in reply.text.lower()
        assert "[redacted]" in reply.text
        assert fake.find("sendChatAction", after=mark, chat_id=101, action="typing")

    assert all(DEMO_TOKEN not in text for text in sent_texts(fake))
    # The answer was the secret: it must not have reached the model or any log line.
    assert DEMO_TOKEN not in caplog.text
    assert TOKEN not in caplog.text
    assert any("HTTP Request" in r.getMessage() for r in caplog.records if r.name == "httpx")


async def test_a_message_with_a_credential_is_deleted_and_a_failed_delete_tells_the_owner_to_rotate(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        command_id, added = await demo_added(bot, 201)
        await fake.wait_call("deleteMessage", chat_id=201, message_id=command_id)
        assert "delete it yourself" not in added.text
        assert len(fake.find("deleteMessage", chat_id=201, message_id=command_id)) == 1

        fake.fail_delete = True
        fake.send(private_chat(202), f"/mcp_add demo {bot.mcp_url} --bearer {DEMO_TOKEN}", sender=user(202))
        refused = await fake.wait_reply(202, "rotate the key")
        assert "delete it yourself" in refused.text

        # A secret answer that cannot be deleted gets the same advice.
        fake.send(private_chat(203), f"/mcp_add demo {bot.mcp_url} --bearer", sender=user(203))
        await fake.wait_reply(203, OWNER_ANSWER_PROMPT)
        fake.send(private_chat(203), DEMO_TOKEN, sender=user(203))
        note = await fake.wait_reply(203, "could not delete your answer")
        assert "rotate the key" in note.text
        await fake.wait_reply(203, "Added demo")

    assert all(DEMO_TOKEN not in text for text in sent_texts(fake))


@pytest.mark.parametrize("prefix", ["\u200b/", "\ufeff/", "\u2060/", "\uff0f", "\u2215"])
async def test_a_hidden_or_look_alike_slash_before_mcp_add_still_makes_a_command_that_is_deleted(
    tmp_path: Path, prefix: str
) -> None:
    async with running_bot(tmp_path) as bot:
        sent, _ = await demo_added(bot, 211, slash=prefix)
        await bot.fake.wait_call("deleteMessage", chat_id=211, message_id=sent)
    assert all(DEMO_TOKEN not in text for text in sent_texts(bot.fake))


async def test_in_a_group_only_the_creator_is_the_owner_and_anonymous_admins_are_refused(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path) as bot:
        fake, group = bot.fake, owned_group(bot.fake, -1001, 501)

        mark = fake.mark()
        fake.send(group, f"/mcp_add demo {bot.mcp_url}", sender=user(502))
        refused = await fake.wait_reply(-1001, "Only this chat's owner", after=mark)
        assert "/mcp_add" in refused.text

        mark = fake.mark()
        fake.send(group, f"/mcp_add demo {bot.mcp_url}", sender=ANONYMOUS_ADMIN, sender_chat=group)
        await fake.wait_reply(-1001, "Only this chat's owner", after=mark)

        mark = fake.mark()
        fake.send(group, "/mcp_list", sender=user(501))
        await fake.wait_reply(-1001, "No remote MCP servers", after=mark)

        assert len(fake.find("getChatAdministrators", chat_id=-1001)) == 1  # cached
        # Nothing was saved for the group: the refused adds never reached the store.
        assert not list((bot.host.config.data_dir / "workspaces").glob("*/.volcanic/mcp/servers.json"))


async def test_a_chat_waiting_for_a_secret_answer_holds_only_its_own_queue(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake, group = bot.fake, owned_group(bot.fake, -1002, 601)

        fake.send(group, f"/mcp_add demo {bot.mcp_url} --bearer", sender=user(601))
        await fake.wait_reply(-1002, OWNER_ANSWER_PROMPT)
        await fake.wait_reply(-1002, "Press Cancel")
        # Another member talks meanwhile: that is not the answer, and it waits its turn.
        fake.send(group, "hello", sender=user(602))
        mark = fake.mark()
        fake.send(private_chat(700), "/help", sender=user(700))
        await fake.wait_reply(700, "Commands:", after=mark)
        assert len(fake.texts(-1002)) == 2  # only the question (and its Cancel button) so far

        answer_id = fake.send(group, DEMO_TOKEN, sender=user(601))
        await fake.wait_call("deleteMessage", chat_id=-1002, message_id=answer_id)
        overview = await fake.wait_reply(-1002, "Active tools:")
        texts = fake.texts(-1002)
        added = next(i for i, t in enumerate(texts) if t.startswith("Added demo"))
        assert added < texts.index(overview.text)
        assert "demo__whoami" in overview.text
        # In a group, replies answer the message they are about.
        assert overview.params["reply_parameters"]["allow_sending_without_reply"] is True


async def test_two_chats_never_see_each_others_servers(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        for chat_id, name in ((801, "alpha"), (802, "beta")):
            fake.send(
                private_chat(chat_id),
                f"/mcp_add {name} {bot.mcp_url} --bearer {DEMO_TOKEN}",
                sender=user(chat_id),
            )
        await fake.wait_reply(801, "Added alpha")
        await fake.wait_reply(802, "Added beta")
        mark = fake.mark()
        fake.send(private_chat(801), "what can you do?", sender=user(801))
        fake.send(private_chat(802), "what can you do?", sender=user(802))
        first = await fake.wait_reply(801, "Active tools:", after=mark)
        second = await fake.wait_reply(802, "Active tools:", after=mark)
    assert "alpha__whoami" in first.text
    assert "beta__" not in first.text
    assert "beta__whoami" in second.text
    assert "alpha__" not in second.text


async def test_edits_channel_posts_and_commands_for_other_bots_are_ignored(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake, chat = bot.fake, private_chat(1101)
        fake.send(chat, "/help", sender=user(1101), kind="edited_message")
        fake.send(
            {"id": -1009, "type": "channel", "title": "News"}, "/help", sender=None, kind="channel_post"
        )
        fake.send(chat, "/help@other_bot", sender=user(1101))
        fake.send(chat, "/help@Playa_Test_Bot", sender=user(1101))
        await fake.wait_reply(1101, "Commands:")
        assert len(fake.texts(1101)) == 1
        mark = fake.mark()
        fake.send(chat, "/start", sender=user(1101))
        welcome = await fake.wait_reply(1101, "Hello!", after=mark)
        assert "/mcp_add" in welcome.text
        assert not fake.find("sendMessage", chat_id=-1009)
        offsets = [c.params.get("offset") for c in fake.find("getUpdates")]
        assert offsets[-1] is not None  # every update was taken, ignored ones included


async def test_a_failing_message_is_answered_politely_logged_without_the_token_and_the_bot_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_bot(tmp_path) as bot:
        fake, chat = bot.fake, private_chat(1301)
        handle = bot.host.handle

        async def failing(session: Any, message: Any, ui: Any, **live: Any) -> Any:
            if message.text == "boom":
                raise RuntimeError(f"broken while calling /bot{TOKEN}/sendMessage")
            return await handle(session, message, ui, **live)

        monkeypatch.setattr(bot.host, "handle", failing)
        fake.send(chat, "boom", sender=user(1301))
        await fake.wait_reply(1301, "Sorry, something went wrong")
        fake.send(chat, "/help", sender=user(1301))
        await fake.wait_reply(1301, "Commands:")
    assert "RuntimeError: broken while calling" in caplog.text
    assert TOKEN not in caplog.text


async def test_the_owner_stops_a_running_turn_without_waiting_behind_it(tmp_path: Path) -> None:
    async with serve_provider() as provider:
        step = hang()
        provider.script(step, text("ready again"))
        async with running_bot(tmp_path, model=provider.model("openai-chat")) as bot:
            fake, chat = bot.fake, private_chat(101)
            fake.send(chat, "think about it", sender=user(101))
            with anyio.fail_after(10):
                await step.reached.wait()
            mark = fake.mark()
            fake.send(chat, "/stop", sender=user(101))
            await fake.wait_reply(101, "Stopping the running turn.", after=mark)
            await fake.wait_reply(101, "Stopped.", after=mark)
            mark = fake.mark()
            fake.send(chat, "hello", sender=user(101))
            await fake.wait_reply(101, "ready again", after=mark)


async def test_an_edit_that_adds_a_key_is_deleted_the_owner_told_to_rotate_and_nothing_runs(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path) as bot:
        fake, group = bot.fake, owned_group(bot.fake, -1501, 1601)
        original = fake.send(group, "hello everyone", sender=user(1601))
        await fake.wait_reply(-1501, "[offline model]")
        mark = fake.mark()
        fake.send(
            group,
            f"/mcp_add demo {bot.mcp_url} --bearer {DEMO_TOKEN}",
            sender=user(1601),
            kind="edited_message",
            message_id=original,
        )
        await fake.wait_call("deleteMessage", after=mark, chat_id=-1501, message_id=original)
        note = await fake.wait_reply(-1501, "rotate that key", after=mark)
        assert DEMO_TOKEN not in note.text
        # An edit that carries nothing secret is neither run nor answered.
        fake.send(group, "/help", sender=user(1601), kind="edited_message", message_id=original)
        fake.send(group, "/mcp_list", sender=user(1601))
        await fake.wait_reply(-1501, "No remote MCP servers", after=mark)
        assert not [t for t in fake.texts(-1501, after=mark) if t.startswith("Commands:")]
        assert not [t for t in fake.texts(-1501, after=mark) if t.startswith("Added")]


async def test_in_a_forum_topic_replies_questions_and_buttons_stay_in_the_topic(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake, forum = bot.fake, owned_group(bot.fake, -1701, 1701, forum=True)
        fake.send(forum, "/help", sender=user(1702), thread_id=77)
        helped = await fake.wait_reply(-1701, "Commands:")
        assert helped.params["message_thread_id"] == 77

        fake.send(forum, f"/mcp_add demo {bot.mcp_url} --bearer", sender=user(1701), thread_id=78)
        question = await fake.wait_reply(-1701, OWNER_ANSWER_PROMPT)
        assert question.params["message_thread_id"] == 78
        buttons = await fake.wait_reply(-1701, "Press Cancel")
        assert buttons.params["message_thread_id"] == 78
        assert buttons.params["reply_markup"]["inline_keyboard"]
        fake.send(forum, DEMO_TOKEN, sender=user(1701), thread_id=78)
        added = await fake.wait_reply(-1701, "Added demo")
        assert added.params["message_thread_id"] == 78
        typing = fake.find("sendChatAction", chat_id=-1701)
        assert all(c.params.get("message_thread_id") in (77, 78, None) for c in typing)


async def test_the_cancel_button_works_only_for_the_asker_and_nothing_is_saved(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake, group = bot.fake, owned_group(bot.fake, -1801, 1801)
        fake.send(group, f"/mcp_add demo {bot.mcp_url} --bearer", sender=user(1801))
        buttons = await fake.wait_reply(-1801, "Press Cancel")

        mark = fake.mark()
        fake.press(buttons, "Cancel", sender=user(1802))
        refused = await fake.wait_call("answerCallbackQuery", after=mark)
        assert "someone else" in refused.params["text"]
        fake.press(buttons, "Cancel", sender=user(1801))
        await fake.wait_call("answerCallbackQuery", after=mark, where=lambda c: not c.params.get("text"))
        ended = await fake.wait_reply(-1801, "nothing was saved", after=mark)
        assert ended.at > refused.at
        await fake.wait_call(
            "editMessageReplyMarkup", after=mark, chat_id=-1801, message_id=buttons.result_id
        )

        # /cancel ends a question too, and a key sent after it never reaches the model.
        fake.send(group, f"/mcp_add demo {bot.mcp_url} --bearer", sender=user(1801))
        await fake.wait_reply(-1801, OWNER_ANSWER_PROMPT, after=mark)
        mark = fake.mark()
        fake.send(group, "/cancel", sender=user(1801))
        await fake.wait_reply(-1801, "nothing was saved", after=mark)
        late = fake.send(group, DEMO_TOKEN, sender=user(1801))
        await fake.wait_call("deleteMessage", after=mark, chat_id=-1801, message_id=late)
        await fake.wait_reply(-1801, "looks like a key", after=mark)
        fake.send(group, "/mcp_list", sender=user(1801))
        await fake.wait_reply(-1801, "No remote MCP servers", after=mark)
    assert not list((tmp_path / "sessions").rglob("history.json"))


async def test_a_command_is_never_taken_as_the_secret_answer(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake, chat = bot.fake, private_chat(1901)
        fake.send(chat, f"/mcp_add demo {bot.mcp_url} --bearer", sender=user(1901))
        await fake.wait_reply(1901, OWNER_ANSWER_PROMPT)
        mark = fake.mark()
        fake.send(chat, "/mcp_list", sender=user(1901))
        await fake.wait_reply(1901, "No remote MCP servers", after=mark)  # at once, beside the question
        fake.send(chat, DEMO_TOKEN, sender=user(1901))
        await fake.wait_reply(1901, "Added demo", after=mark)


async def test_start_in_a_private_chat_explains_the_bot_and_the_description_is_set(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        description = await fake.wait_call("setMyDescription")
        short = await fake.wait_call("setMyShortDescription")
        assert "MCP" in description.params["description"]
        assert len(short.params["short_description"]) <= 120
        fake.send(private_chat(2001), "/start", sender=user(2001))
        welcome = await fake.wait_reply(2001, "Hello!")
        assert "/mcp_add <name> <url> --bearer" in welcome.text
        assert "delete your answer" in welcome.text


async def test_group_members_get_a_notice_naming_a_server_added_or_removed_without_its_url_or_key(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path) as bot:
        fake, group = bot.fake, owned_group(bot.fake, -1006, 601, forum=True)

        mark = fake.mark()
        fake.send(group, f"/mcp_add demo {bot.mcp_url} --bearer {DEMO_TOKEN}", sender=user(601), thread_id=7)
        added = await fake.wait_reply(-1006, "Added demo", after=mark)
        assert added.params["message_thread_id"] == 7
        notice = await fake.wait_reply(-1006, "The chat's owner added the remote MCP server demo", after=mark)
        assert (
            notice.text == "The chat's owner added the remote MCP server demo: the agent can use its 5 tools."
        )
        # To every member: not a reply to the owner's message, and in the General topic.
        assert "reply_parameters" not in notice.params
        assert "message_thread_id" not in notice.params

        mark = fake.mark()
        fake.send(group, "/mcp_remove demo", sender=user(601))
        await fake.wait_reply(
            -1006, "The chat's owner removed the remote MCP server demo; its 5 tools", after=mark
        )

        # In a private chat the owner is the only member: the command's reply says it all.
        mark = fake.mark()
        fake.send(private_chat(602), f"/mcp_add demo {bot.mcp_url} --bearer {DEMO_TOKEN}", sender=user(602))
        await fake.wait_reply(602, "Added demo", after=mark)

    assert not [t for t in fake.texts(602) if "The chat's owner" in t]
    for sent in sent_texts(fake):
        assert DEMO_TOKEN not in sent
        if sent.startswith("The chat's owner"):
            assert bot.mcp_url.split("/mcp")[0] not in sent


async def test_with_privacy_mode_on_the_secret_question_forces_a_reply_that_reaches_the_bot(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path) as bot:
        fake, group = bot.fake, group_chat(-1007)
        fake.privacy_mode = True
        fake.administrators[-1007] = [creator(user(701))]
        command = fake.send(group, f"/mcp_add demo {bot.mcp_url} --bearer", sender=user(701))
        question = await fake.wait_reply(-1007, OWNER_ANSWER_PROMPT)
        # The asker's client opens a reply to the question: with privacy mode on, only a reply
        # to the bot's message reaches it. Selective: the question answers the asker's command.
        assert question.params["reply_markup"] == {"force_reply": True, "selective": True}
        assert question.params["reply_parameters"]["message_id"] == command
        assert "replying to this message" in question.text
        buttons = await fake.wait_reply(-1007, "Press Cancel")
        assert [b["text"] for row in buttons.params["reply_markup"]["inline_keyboard"] for b in row] == [
            "Cancel"
        ]

        mark = fake.mark()
        fake.send(group, DEMO_TOKEN, sender=user(701))  # not a reply: Telegram keeps it from the bot
        answer = fake.send(group, DEMO_TOKEN, sender=user(701), reply_to=question)
        await fake.wait_call("deleteMessage", after=mark, chat_id=-1007, message_id=answer)
        added = await fake.wait_reply(-1007, "Added demo", after=mark)
        assert "demo__whoami" in added.text
        await fake.wait_call(
            "editMessageReplyMarkup", after=mark, chat_id=-1007, message_id=buttons.result_id
        )
    assert all(DEMO_TOKEN not in text for text in sent_texts(fake))


async def test_a_key_after_bearer_is_deleted_and_never_kept_even_when_its_draw_looks_tame(
    tmp_path: Path,
) -> None:
    # Random base64 that its / and + cut into short runs, which no shape test alone catches.
    key = "q/htfobw90Q/+GQ0XGYPQmzQ+z/9"
    async with running_bot(tmp_path) as bot:
        fake, chat = bot.fake, private_chat(2101)
        mark = fake.mark()
        sent = fake.send(chat, f"Bearer {key}", sender=user(2101))
        await fake.wait_call("deleteMessage", after=mark, chat_id=2101, message_id=sent)
        await fake.wait_reply(2101, "looks like a key", after=mark)
        assert all(key not in text for text in sent_texts(fake))
    assert all(key.encode() not in data for _, data in canary.files_under(tmp_path))
