"""A server's question in Telegram: buttons for the person whose message started the turn, and nobody else.

The bot runs for real against the fake Bot API; the questions come from the SDK's own MCP
server on loopback, asked during a tool call the offline model makes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from telegram import Bot, Update

from playa.core import Field, Question, cancelled_for
from playa.telegram import WebhookConfig, build_bot
from playa.telegram._answers import PendingAnswers
from playa.telegram._approval_messages import ApprovalMessages
from playa.telegram._buttons import Buttons
from playa.telegram._deletions import Deletions
from playa.telegram._outbox import Outbox
from playa.telegram._panel import PanelMessages
from playa.telegram._parts import BotParts
from playa.telegram._ui import TelegramUI
from servers.node import server_everything
from servers.python_servers import serve_asgi, serve_mcp
from support.asking import asking_server, bot_with_asking_server, edited, form_shown, form_waiting, press
from support.telegram import DEMO_TOKEN, OWNER_ANSWER_PROMPT, TOKEN, running_bot

from .fake_bot_api import FakeBotApi, creator, group_chat, private_chat, user

pytestmark = pytest.mark.anyio


async def test_a_form_is_filled_in_with_buttons_and_a_forced_reply_and_accepted(tmp_path: Path) -> None:
    chat = private_chat(3101)
    async with bot_with_asking_server(tmp_path, chat, 3101) as bot:
        fake, me = bot.fake, user(3101)
        mark = fake.mark()
        asked = fake.send(chat, "asking__form {}", sender=me)
        shown = await fake.wait_reply(3101, "asking asks: Tell me about you", after=mark)
        assert shown.params["reply_parameters"]["message_id"] == asked
        assert "• Name: required, not given — Your name" in shown.text
        assert "• colour: green (default)" in shown.text
        assert shown.labels == [
            "✎ Name: required, not given",
            "▾ colour: green (default)",
            "☐ Subscribe",
            "✎ Age: 30 (default)",
            "Accept",
            "Decline",
            "Cancel",
        ]

        # A yes-or-no field toggles; a choice opens its options, and picking one closes them.
        mark = fake.mark()
        press(fake, shown, "☐ Subscribe", sender=me)
        shown = await edited(fake, shown, "• Subscribe: yes", after=mark)
        assert "☑ Subscribe" in shown.labels
        press(fake, shown, "▾ colour: green (default)", sender=me)
        shown = await fake.wait_call("editMessageText", after=mark, where=lambda c: "‹ Back" in c.labels)
        assert shown.labels == ["red", "☑ green", "blue", "‹ Back"]
        press(fake, shown, "blue", sender=me)
        shown = await edited(fake, shown, "• colour: blue", after=mark)

        # Accept with a required field empty asks for it; its value completes the answer.
        mark = fake.mark()
        press(fake, shown, "Accept", sender=me)
        prompt = await fake.wait_reply(3101, "Name is required. Reply with Name", after=mark)
        assert prompt.params["reply_markup"]["force_reply"] is True
        fake.send(chat, "Ada", sender=me, reply_to=prompt)
        result = await fake.wait_reply(3101, "asking__form returned", after=mark)
        final = await edited(fake, shown, "Accepted.", after=mark)

    content = json.loads(result.text.split("answered: ", 1)[1])
    assert content == {
        "action": "accept",
        "content": {"name": "Ada", "colour": "blue", "subscribe": True, "age": 30},
    }
    assert "reply_markup" not in final.params  # the buttons are gone
    assert "• Name: Ada" in final.text
    # Every button press was answered at once.
    assert len(fake.find("answerCallbackQuery")) == 4


async def test_accept_alone_takes_the_defaults_and_a_bad_reply_is_asked_again(tmp_path: Path) -> None:
    async with form_waiting(tmp_path, 3201) as (fake, chat, me, mark, shown):
        press(fake, shown, "✎ Age: 30 (default)", sender=me)
        prompt = await fake.wait_reply(3201, "Reply with Age", after=mark)
        fake.send(chat, "thirty", sender=me, reply_to=prompt)
        again = await fake.wait_reply(3201, "age is an integer, not 'thirty'", after=mark)
        fake.send(chat, "41", sender=me, reply_to=again)
        shown = await edited(fake, shown, "• Age: 41", after=mark)
        press(fake, shown, "✎ Name: required, not given", sender=me)
        prompt = await fake.wait_reply(3201, "Reply with Name (Your name)", after=mark)
        fake.send(chat, "Grace", sender=me, reply_to=prompt)
        shown = await edited(fake, shown, "• Name: Grace", after=mark)
        press(fake, shown, "Accept", sender=me)
        result = await fake.wait_reply(3201, "asking__form returned", after=mark)
    content = json.loads(result.text.split("answered: ", 1)[1])
    assert content["content"] == {"name": "Grace", "colour": "green", "subscribe": False, "age": 41}


async def test_a_key_sent_as_a_form_value_is_deleted_and_never_reaches_the_server(tmp_path: Path) -> None:
    key = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
    async with form_waiting(tmp_path, 3301) as (fake, chat, me, mark, shown):
        press(fake, shown, "✎ Name: required, not given", sender=me)
        prompt = await fake.wait_reply(3301, "Reply with Name", after=mark)
        sent = fake.send(chat, key, sender=me, reply_to=prompt)
        await fake.wait_call("deleteMessage", after=mark, chat_id=3301, message_id=sent)
        again = await fake.wait_reply(3301, "That looks like a key, and a form never takes one.", after=mark)
        fake.send(chat, "Ada", sender=me, reply_to=again)
        shown = await edited(fake, shown, "• Name: Ada", after=mark)
        press(fake, shown, "Accept", sender=me)
        result = await fake.wait_reply(3301, "asking__form returned", after=mark)
    assert '"name":"Ada"' in result.text
    assert all(key not in call.text for call in fake.calls)


async def test_in_a_group_only_the_asker_can_answer_and_others_are_told_at_once(tmp_path: Path) -> None:
    group = group_chat(-3401, forum=True)
    async with bot_with_asking_server(tmp_path, group, 3401) as bot:
        fake, member, other = bot.fake, user(3402), user(3403)
        mark = fake.mark()
        fake.send(group, "asking__form {}", sender=member, thread_id=5)
        shown = await fake.wait_reply(-3401, "asking asks:", after=mark)
        assert shown.params["message_thread_id"] == 5  # in the topic the message came from

        press(fake, shown, "Accept", sender=other)
        refused = await fake.wait_call("answerCallbackQuery", after=mark)
        assert refused.params["text"] == "This button is for someone else."
        press(fake, shown, "Decline", sender=user(3401))  # the owner is not the asker either
        await fake.wait_call(
            "answerCallbackQuery",
            after=mark,
            where=lambda c: c.at > refused.at and bool(c.params.get("text")),
        )
        press(fake, shown, "Decline", sender=member)
        result = await fake.wait_reply(-3401, "asking__form returned", after=mark)
        await edited(fake, shown, "Declined.", after=mark)
    assert result.text.endswith('answered: {"action":"decline"}')
    assert result.params["message_thread_id"] == 5


async def test_cancel_in_the_chat_ends_the_question(tmp_path: Path) -> None:
    async with form_waiting(tmp_path, 3601) as (fake, chat, me, mark, shown):
        fake.send(chat, "/cancel", sender=me)
        result = await fake.wait_reply(3601, "asking__form returned", after=mark)
        await edited(fake, shown, "Cancelled.", after=mark)
    assert result.text.endswith('answered: {"action":"cancel"}')


@dataclass
class Direct:
    """A message's UI on its own, and the buttons it registers with, with no bot dispatching updates."""

    ui: TelegramUI
    buttons: Buttons
    bot: Bot

    async def hand_over_presses(self, fake: FakeBotApi) -> None:
        """Give the buttons the presses queued in the fake, as the dispatcher would."""
        while fake._updates:
            update = Update.de_json(fake._updates.pop(0), self.bot)
            if update.callback_query is not None:
                await self.buttons.pressed(update.callback_query)


@asynccontextmanager
async def direct_ui(fake: FakeBotApi, *, chat_id: int, user_id: int, owner_id: int) -> AsyncIterator[Direct]:
    async with serve_asgi(fake.app()) as api:
        bot = build_bot(TOKEN, base_url=api.url)
        async with bot:
            outbox = Outbox(bot)
            buttons = Buttons(outbox)
            parts = BotParts(
                outbox,
                PendingAnswers(),
                buttons,
                ApprovalMessages(outbox, buttons, lambda _: None),
                Deletions(outbox),
                PanelMessages(outbox, buttons, lambda _: None),
            )
            ui = TelegramUI(
                parts,
                chat_id=chat_id,
                thread_id=None,
                user_id=user_id,
                message_id=1,
                redact=lambda text: text.replace("s3cr3t-value-0123456789", "[redacted]"),
                group=chat_id < 0,
                owner_id=owner_id,
            )
            yield Direct(ui, buttons, bot)
        fake.close()


async def test_an_unanswered_question_is_cancelled_after_the_timeout_and_its_buttons_removed() -> None:
    fake = FakeBotApi(TOKEN)
    question = Question(asker="asking", text="Tell me", fields=(Field("ok", "boolean"),))
    async with direct_ui(fake, chat_id=3701, user_id=3701, owner_id=3701) as direct:
        started = anyio.current_time()
        with anyio.fail_after(20):
            answer = await direct.ui.question(question, timeout=0.5)
        waited = anyio.current_time() - started
    assert answer.action == "cancel"
    assert waited >= 0.5
    [shown] = fake.find("sendMessage", chat_id=3701)
    [final] = fake.find("editMessageText", message_id=shown.result_id)
    assert "Nobody answered in time: cancelled." in final.text
    assert "reply_markup" not in final.params


@pytest.mark.parametrize("mode", ["polling", "webhook"])
async def test_server_everythings_form_through_a_group_where_another_member_presses_too(
    tmp_path: Path, mode: str
) -> None:
    group = group_chat(-3801)
    owner, member, other = user(3801), user(3802), user(3803)
    webhook = WebhookConfig(url="https://bot.example.org/hook", listen="127.0.0.1", port=0)
    ports: list[int] = []
    async with (
        server_everything("streamable-http") as everything,
        running_bot(
            tmp_path,
            webhook=webhook if mode == "webhook" else None,
            listening=ports.append,
        ) as bot,
        anyio.create_task_group() as delivery,
    ):
        fake = bot.fake
        if mode == "webhook":
            fake.proxy = f"http://127.0.0.1:{ports[0]}/hook"  # a reverse proxy in front of the bot
            delivery.start_soon(fake.post_to_webhook)
        fake.administrators[-3801] = [creator(owner)]
        fake.send(group, f"/mcp_add everything {everything}", sender=owner)
        await fake.wait_reply(-3801, "Added everything", timeout=30)

        mark = fake.mark()
        fake.send(group, "everything__trigger-elicitation-request {}", sender=member)
        shown = await fake.wait_reply(-3801, "everything asks: Please provide inputs", after=mark, timeout=30)
        assert "• Integer: 42 (default)" in shown.text
        assert "✎ String: required, not given" in shown.labels

        press(fake, shown, "Accept", sender=other)
        refused = await fake.wait_call("answerCallbackQuery", after=mark)
        assert refused.params["text"] == "This button is for someone else."

        press(fake, shown, "☐ Boolean", sender=member)
        shown = await edited(fake, shown, "• Boolean: yes", after=mark)
        press(fake, shown, "▾ Untitled Single Select Enum: Monica (default)", sender=member)
        shown = await fake.wait_call("editMessageText", after=mark, where=lambda c: "Joey" in c.labels)
        press(fake, shown, "Joey", sender=member)
        shown = await edited(fake, shown, "• Untitled Single Select Enum: Joey", after=mark)
        press(fake, shown, "▾ Untitled Multiple Select Enum: Guitar (default)", sender=member)
        shown = await fake.wait_call("editMessageText", after=mark, where=lambda c: "Done" in c.labels)
        press(fake, shown, "Piano", sender=member)
        shown = await fake.wait_call("editMessageText", after=mark, where=lambda c: "☑ Piano" in c.labels)
        mark = fake.mark()
        press(fake, shown, "Done", sender=member)
        shown = await fake.wait_call("editMessageText", after=mark, where=lambda c: "Accept" in c.labels)
        assert "• Untitled Multiple Select Enum: Guitar,Piano" in shown.text

        press(fake, shown, "Accept", sender=member)
        prompt = await fake.wait_reply(-3801, "String is required. Reply with String", after=mark)
        fake.send(group, "Ada Lovelace", sender=member, reply_to=prompt)
        result = await fake.wait_reply(-3801, "User provided the requested information", after=mark)
        await edited(fake, shown, "Accepted.", after=mark)
        delivery.cancel_scope.cancel()

    # The server's own summary (its Markdown list shown as Telegram's bullets), then its raw result.
    assert "Name: Ada Lovelace\n• Agreed to terms: true\n• Favorite Integer: 42" in result.text
    assert '"untitledSingleSelectEnum": "Joey"' in result.text
    assert '"Piano"' in result.text
    if mode == "webhook":
        assert not fake.find("getUpdates")


async def test_a_question_that_quotes_the_chats_key_shows_it_redacted_in_the_text_and_the_buttons(
    tmp_path: Path,
) -> None:
    key = "Zq8vN3mX7pL2wK9rT4yH6cB1"  # no secret word in it: the form is not refused for its title
    chat = private_chat(4301)
    async with serve_mcp(asking_server(), protocols="handshake") as served, running_bot(tmp_path) as bot:
        fake, me = bot.fake, user(4301)
        fake.send(chat, f"/mcp_add asking {served.url} --header 'X-Key: {key}'", sender=me)
        await fake.wait_reply(4301, "Added asking")
        mark = fake.mark()
        fake.send(chat, "asking__leaky {}", sender=me)
        shown = await fake.wait_reply(4301, "asking asks: I got [redacted]", after=mark)
        assert shown.labels[0] == "☐ Keep [redacted]?"
        press(fake, shown, "Accept", sender=me)
        await fake.wait_reply(4301, "asking__leaky returned", after=mark)
        await edited(fake, shown, "Accepted.", after=mark)
    for call in fake.calls:
        assert key not in json.dumps(call.params)


async def test_help_and_read_only_commands_answer_at_once_while_a_form_waits(tmp_path: Path) -> None:
    async with form_waiting(tmp_path, 4401) as (fake, chat, me, mark, shown):
        fake.send(chat, "/help", sender=me)
        helped = await fake.wait_reply(4401, "Commands:", after=mark)
        fake.send(chat, "/mcp_list", sender=me)
        listed = await fake.wait_reply(4401, "asking: connected", after=mark)
        fake.send(chat, "/mcp_tools asking", sender=me)
        tools = await fake.wait_reply(4401, "asking__form", after=mark)
        # The form still waits, untouched, and its answer still reaches the server.
        assert not fake.find("editMessageText", after=mark, message_id=shown.result_id)
        press(fake, shown, "Decline", sender=me)
        result = await fake.wait_reply(4401, "asking__form returned", after=mark)
    assert result.text.endswith('answered: {"action":"decline"}')
    assert helped.at < listed.at < tools.at < result.at
    assert not [text for text in fake.texts(4401, after=mark) if "cancelled" in text or "Unknown" in text]


async def test_another_command_cancels_the_form_with_a_note_and_then_runs(tmp_path: Path) -> None:
    async with form_waiting(tmp_path, 4501) as (fake, chat, me, mark, shown):
        fake.send(chat, "/mcp_remove asking", sender=me)
        note = await fake.wait_reply(4501, cancelled_for("mcp_remove"), after=mark)
        await edited(fake, shown, "Cancelled.", after=mark)
        result = await fake.wait_reply(4501, "asking__form returned", after=mark)
        removed = await fake.wait_reply(4501, "Removed asking", after=mark)
    assert result.text.endswith('answered: {"action":"cancel"}')
    assert note.at < result.at < removed.at  # the command kept its place after the turn


async def test_in_a_group_a_members_command_never_cancels_anothers_question_and_the_owners_does(
    tmp_path: Path,
) -> None:
    group = group_chat(-4601)
    async with bot_with_asking_server(tmp_path, group, 4601) as bot:
        fake, owner, member, other = bot.fake, user(4601), user(4602), user(4603)
        mark = fake.mark()
        shown = await form_shown(fake, group, member, after=mark)
        # Another member: /help at once, an owner's command refused at once, the question untouched.
        fake.send(group, "/help", sender=other)
        await fake.wait_reply(-4601, "Commands:", after=mark)
        fake.send(group, "/reset", sender=other)
        await fake.wait_reply(-4601, "Only this chat's owner can use /reset.", after=mark)
        assert not fake.find("editMessageText", after=mark, message_id=shown.result_id)
        # The owner's command gets past the member's question: it is cancelled, then the command runs.
        fake.send(group, "/reset", sender=owner)
        note = await fake.wait_reply(-4601, cancelled_for("reset"), after=mark)
        await edited(fake, shown, "Cancelled.", after=mark)
        result = await fake.wait_reply(-4601, "asking__form returned", after=mark)
        reset = await fake.wait_reply(-4601, "This chat's conversation is forgotten.", after=mark)
    assert result.text.endswith('answered: {"action":"cancel"}')
    assert note.at < result.at < reset.at


async def test_a_read_only_command_answers_at_once_while_the_secret_question_waits_and_another_cancels_it(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path) as bot:
        fake, chat, me = bot.fake, private_chat(4701), user(4701)
        fake.send(chat, f"/mcp_add demo {bot.mcp_url} --bearer", sender=me)
        await fake.wait_reply(4701, OWNER_ANSWER_PROMPT)
        mark = fake.mark()
        fake.send(chat, "/mcp_list", sender=me)
        await fake.wait_reply(4701, "No remote MCP servers", after=mark)
        # A plain message is still the answer, deleted, never a turn.
        answer = fake.send(chat, DEMO_TOKEN, sender=me)
        await fake.wait_call("deleteMessage", after=mark, chat_id=4701, message_id=answer)
        await fake.wait_reply(4701, "Added demo", after=mark)

        fake.send(chat, f"/mcp_add other {bot.mcp_url} --bearer", sender=me)
        await fake.wait_reply(4701, OWNER_ANSWER_PROMPT, after=mark)
        mark = fake.mark()
        fake.send(chat, "/mcp_remove demo", sender=me)
        note = await fake.wait_reply(4701, cancelled_for("mcp_remove"), after=mark)
        unsaved = await fake.wait_reply(4701, "No answer came, so nothing was saved.", after=mark)
        removed = await fake.wait_reply(4701, "Removed demo", after=mark)
    assert note.at < unsaved.at < removed.at
    assert not list((tmp_path / "sessions").rglob("history.json"))  # no turn ran, the key never in one
