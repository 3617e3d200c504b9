"""Streamed replies in Telegram: drafts in a private chat, one message edited at a bounded rate in
a group, flood control waited out without losing text, and a key split across the provider's
pieces never in a draft, an edit or a message.

The bot runs against the fake Bot API; the model is pydantic-ai's real client against the
loopback provider, which streams server-sent events.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from pydantic_ai.models import Model

from playa.core import REDACTED
from servers.node import server_everything
from servers.python_servers import serve_asgi
from support.cli_host import cli_host
from support.provider_wire import pieces
from support.providers import ProviderServer, serve_provider, tool_call
from support.telegram import TOKEN, bot_running

from .fake_bot_api import ApiCall, FakeBotApi, creator, group_chat, private_chat, user

pytestmark = pytest.mark.anyio

KEY = "sk-live-8f3KqZ2xW9vT4mNcR7pL0aYe"
BEFORE = "Your key is "
AFTER = ", keep it safe."
CHAT = 411
GROUP = -100411
OWNER = 412
SPLITS = range(1, len(KEY))
"""Every place a key can be split between two of the provider's pieces."""
EDIT_EVERY = 1.0
"""The bot's edit rate (``LiveSettings.edit_every``)."""


@asynccontextmanager
async def streaming_bot(
    tmp_path: Path, model: Callable[[ProviderServer], Model], environ: dict[str, str] | None = None
) -> AsyncIterator[tuple[FakeBotApi, ProviderServer]]:
    fake = FakeBotApi(TOKEN)
    fake.administrators[GROUP] = [creator(user(OWNER))]
    environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "PLAYA_EGRESS_ALLOW": "127.0.0.1/32", **(environ or {})}
    async with (
        serve_provider() as provider,
        serve_asgi(fake.app()) as api,
        cli_host(tmp_path, environ, console=False, model=model(provider)) as host,
        bot_running(fake, host, api.url),
    ):
        try:
            yield fake, provider
        finally:
            fake.close()


def _openai(provider: ProviderServer) -> Model:
    return provider.model("openai-chat")


def _draft_after(fake: FakeBotApi, mark: Callable[[], int]) -> Callable[[int], Awaitable[None]]:
    """Between two pieces: wait until the bot showed a draft of what came so far."""

    async def wait(_: int) -> None:
        await fake.wait_call("sendMessageDraft", after=mark())

    return wait


async def test_a_private_chat_sees_drafts_and_no_draft_holds_any_head_of_a_split_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The chat's redactor knows the key: the host's own environment holds it.
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    final = f"{BEFORE}{REDACTED}{AFTER}"
    with anyio.fail_after(240):
        async with streaming_bot(tmp_path, _openai) as (fake, provider):
            for split in SPLITS:
                mark = fake.mark()
                at = len(BEFORE) + split
                text = BEFORE + KEY + AFTER
                provider.script(pieces([text[:at], text[at:]], between=_draft_after(fake, lambda m=mark: m)))
                fake.send(private_chat(CHAT), "what is my key?", sender=user(CHAT))
                reply = await fake.wait_reply(CHAT, AFTER.strip(", "), after=mark, timeout=30)
                drafts = fake.find("sendMessageDraft", after=mark)
                assert drafts, "the reply was not streamed"
                for draft in drafts:
                    assert final.startswith(draft.text.rstrip()), (split, draft.text)
                    assert KEY[:split] not in draft.text.removeprefix(BEFORE.rstrip())
                assert reply.text == final
                assert all(KEY[:3] not in call.text for call in fake.calls[mark:])
    # A draft is the private chat's: the reply itself is one message, sent once.
    assert len([call for call in fake.find("sendMessage") if AFTER.strip(", ") in call.text]) == len(SPLITS)


async def test_a_key_that_markup_splits_shows_in_no_draft_and_the_reply_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sk-live-8**f3…**``: the final reply's text, once its markup is rendered, holds the key;
    a draft, whose emphasis is not closed yet, must not show its head either."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    first, rest = f"Key: {KEY[:9]}**{KEY[9:20]}", f"{KEY[20:]}** end"
    with anyio.fail_after(120):
        async with streaming_bot(tmp_path, _openai) as (fake, provider):
            mark = fake.mark()
            provider.script(pieces([first, rest], between=_draft_after(fake, lambda: mark)))
            fake.send(private_chat(CHAT), "the key?", sender=user(CHAT))
            reply = await fake.wait_reply(CHAT, "end", after=mark, timeout=30)
    drafts = fake.find("sendMessageDraft", after=mark)
    assert drafts
    for call in fake.calls[mark:]:
        assert KEY[:3] not in call.text and KEY[9:14] not in call.text, call
    assert reply.text == f"Key: {REDACTED} end"


async def _paced(_: int) -> None:
    # The provider writes a piece every tenth of a second, as a model does: the bot's edits
    # must keep their own rate whatever the pace.
    await anyio.sleep(0.1)


def _success(calls: list[ApiCall]) -> list[ApiCall]:
    return [call for call in calls if call.status == 200]


async def test_a_group_sees_one_message_edited_within_the_rate_that_ends_as_the_formatted_reply(
    tmp_path: Path,
) -> None:
    words = [f"word{i} " for i in range(30)] + ["**done**"]
    with anyio.fail_after(120):
        async with streaming_bot(tmp_path, _openai) as (fake, provider):
            fake.edit_every = EDIT_EVERY  # Telegram's limit: a faster edit is answered 429
            provider.script(pieces(words, between=_paced))
            mark = fake.mark()
            asked = fake.send(group_chat(GROUP), "count for me", sender=user(OWNER))
            await fake.wait_call(
                "editMessageText", after=mark, where=lambda call: call.text.endswith("done"), timeout=60
            )
    sent = fake.find("sendMessage", after=mark, chat_id=GROUP)
    assert len(sent) == 1, [call.text for call in sent]  # the live message, replaced in place
    [live] = sent
    assert live.params["reply_parameters"]["message_id"] == asked
    edits = fake.find("editMessageText", after=mark)
    assert {call.params["message_id"] for call in edits} == {live.result_id}
    assert not [call for call in edits if call.status == 429], "the bot edited faster than its rate"
    times = [live.at, *(call.at for call in _success(edits))]
    assert all(later - earlier >= EDIT_EVERY - 0.05 for earlier, later in itertools.pairwise(times))
    assert len(_success(edits)) >= 2
    last = _success(edits)[-1]
    assert last.text == "".join(words).replace("**", "")
    assert [entity["type"] for entity in last.params["entities"]] == ["bold"]
    # Each version was the start of the reply.
    for call in [live, *_success(edits)]:
        assert last.text.startswith(call.text.rstrip()), call.text


async def test_a_groups_live_message_never_holds_any_head_of_a_split_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    final = f"{BEFORE}{REDACTED}{AFTER}"
    text = BEFORE + KEY + AFTER

    def _live_after(fake: FakeBotApi, mark: int) -> Callable[[int], Awaitable[None]]:
        async def wait(_: int) -> None:  # between the pieces: the live message shows the first
            await fake.wait_call("sendMessage", after=mark, chat_id=GROUP)

        return wait

    with anyio.fail_after(240):
        async with streaming_bot(tmp_path, _openai) as (fake, provider):
            for split in SPLITS:
                mark = fake.mark()
                at = len(BEFORE) + split
                provider.script(pieces([text[:at], text[at:]], between=_live_after(fake, mark)))
                fake.send(group_chat(GROUP), "what is my key?", sender=user(OWNER))
                reply = await fake.wait_reply(GROUP, AFTER.strip(", "), after=mark, timeout=30)
                shown = [
                    call
                    for call in fake.calls[mark:]
                    if call.method in ("sendMessage", "editMessageText") and call.chat_id == GROUP
                ]
                assert shown
                for call in shown:  # each version is the start of the redacted reply: no head of the key
                    assert final.startswith(call.text.rstrip()), (split, call.text)
                    rest = call.text.removeprefix(BEFORE.rstrip()).lstrip()
                    assert not rest or rest.startswith(REDACTED), (split, call.text)
                assert reply.text == final
                assert all(KEY[:3] not in call.text for call in fake.calls[mark:])


async def test_flood_control_on_edits_slows_the_message_and_loses_no_text(tmp_path: Path) -> None:
    words = [f"w{i} " for i in range(30)] + ["end."]
    with anyio.fail_after(120):
        async with streaming_bot(tmp_path, _openai) as (fake, provider):
            fake.edit_every = 2.5  # stricter than the bot's own second
            provider.script(pieces(words, between=_paced))
            mark = fake.mark()
            fake.send(group_chat(GROUP), "count", sender=user(OWNER))
            last = await fake.wait_call(
                "editMessageText", after=mark, where=lambda call: call.text.endswith("end."), timeout=60
            )
    edits = fake.find("editMessageText", after=mark)
    limited = [call for call in edits if call.status == 429]
    assert limited, "flood control never applied"
    assert last.text == "".join(words)
    assert (
        not fake.find("sendMessage", after=mark, where=None) or len(fake.find("sendMessage", after=mark)) == 1
    )
    # Each edit after a 429 waited for what Telegram asked.
    for refused in limited:
        later = [call for call in _success(edits) if call.at > refused.at]
        if later:
            assert later[0].at - refused.at >= 1.0 - 0.05


async def test_a_reply_longer_than_one_message_replaces_the_live_message_with_its_parts(
    tmp_path: Path,
) -> None:
    lines = [f"line {i} " + "text " * 20 + "\n" for i in range(60)]  # about 7,000 characters
    with anyio.fail_after(120):
        async with streaming_bot(tmp_path, _openai) as (fake, provider):
            mark = fake.mark()

            async def live_shown(_: int) -> None:
                await fake.wait_call("sendMessage", after=mark, chat_id=GROUP)

            provider.script(pieces(lines, between=live_shown))
            fake.send(group_chat(GROUP), "write a lot", sender=user(OWNER))
            deleted = await fake.wait_call("deleteMessage", after=mark, timeout=60)
            await fake.wait_call("sendMessage", after=mark, where=lambda call: "line 59" in call.text)
    [live, *parts] = _success(fake.find("sendMessage", after=mark, chat_id=GROUP))
    assert deleted.params["message_id"] == live.result_id
    assert len(parts) == 2
    assert all(part.at > deleted.at for part in parts)
    assert "".join(part.text for part in parts).split() == "".join(lines).split()


@pytest.mark.npm
async def test_a_servers_progress_shows_in_the_live_message_which_ends_with_the_result(
    tmp_path: Path,
) -> None:
    operation = "everything__trigger-long-running-operation"
    with anyio.fail_after(120):
        async with (
            server_everything() as url,
            streaming_bot(tmp_path, _openai, {"PLAYA_CALL_TIMEOUT": "30"}) as (fake, provider),
        ):
            mark = fake.mark()
            fake.send(group_chat(GROUP), f"/mcp_add everything {url}", sender=user(OWNER))
            await fake.wait_reply(GROUP, "Added everything: connected", after=mark, timeout=30)
            provider.script(
                tool_call(operation, {"duration": 4, "steps": 8}), pieces(["The operation ", "finished."])
            )
            mark = fake.mark()
            fake.send(group_chat(GROUP), "run the long operation", sender=user(OWNER))
            await fake.wait_call(
                "editMessageText", after=mark, where=lambda call: call.text == "The operation finished."
            )
    [live] = fake.find("sendMessage", after=mark, chat_id=GROUP)
    versions = [live.text, *(call.text for call in _success(fake.find("editMessageText", after=mark)))]
    assert any(f"⚙ {operation}…" in version for version in versions)
    assert any(f"{operation}: " in version and "/8" in version for version in versions)
    assert versions[-1] == "The operation finished."
