"""A server's link question: to the asker alone, in their private chat, with the link as a browser
would read it; against the fake Bot API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servers.python_servers import recording_http_server
from support.asking import LINK, bot_with_asking_server, edited, url_buttons

from .fake_bot_api import group_chat, user

pytestmark = pytest.mark.anyio


async def test_a_link_goes_to_the_asker_privately_and_the_group_is_told_to_look_there(tmp_path: Path) -> None:
    group = group_chat(-3501)
    async with bot_with_asking_server(tmp_path, group, 3501) as bot:
        fake, member = bot.fake, user(3502)
        mark = fake.mark()
        fake.send(group, "asking__link {}", sender=member)
        private = await fake.wait_reply(3502, "asking asks: Please log in", after=mark)
        assert LINK in private.text
        assert private.labels == ["Open the link", "Accept", "Decline", "Cancel"]
        assert private.params["reply_markup"]["inline_keyboard"][0][0]["url"] == LINK
        told = await fake.wait_reply(-3501, "I sent it to you in our private chat", after=mark)
        assert told.params["reply_parameters"]["message_id"]
        fake.press(private, "Accept", sender=member)
        result = await fake.wait_reply(-3501, "asking__link returned", after=mark)
        final = await edited(fake, private, "Accepted.", after=mark)
    assert result.text.endswith('answered: {"action":"accept"}')
    assert "reply_markup" not in final.params
    assert all(LINK not in text for text in fake.texts(-3501))


async def test_a_lookalike_link_shows_its_domain_and_warning_with_a_url_button_in_private_only(
    tmp_path: Path,
) -> None:
    group, lookalike = group_chat(-3551), "http://xn--pypal-4ve.example/login?next=%2Fhome"
    async with (
        recording_http_server(path="/consent") as page,
        bot_with_asking_server(tmp_path, group, 3551) as bot,
    ):
        fake, member = bot.fake, user(3552)
        asked = [
            (lookalike, "Decline", "decline"),
            (f"{page.url}?s=1", "Accept", "accept"),
        ]
        for url, label, action in asked:
            mark = fake.mark()
            fake.send(group, f"asking__sign_in {json.dumps({'url': url})}", sender=member)
            private = await fake.wait_reply(3552, "asking asks: Sign in to go on", after=mark)
            assert f"\nLink: {url}\n" in private.text
            assert url_buttons(private) == [url]
            assert private.labels == ["Open the link", "Accept", "Decline", "Cancel"]
            assert private.params["link_preview_options"] == {"is_disabled": True}
            if url == lookalike:
                assert (
                    "\nDomain: p\u0430ypal.example (written xn--pypal-4ve.example)\n"
                    "Warning: 'p\u0430ypal' mixes scripts (Cyrillic, Latin): it may imitate another name.\n"
                ) in private.text
            else:
                assert "\nDomain: 127.0.0.1\n\n" in private.text and "Warning" not in private.text
            await fake.wait_reply(-3551, "I sent it to you in our private chat", after=mark)
            fake.press(private, label, sender=member)
            returned = await fake.wait_reply(-3551, "asking__sign_in returned", after=mark)
            assert returned.text.endswith(f'answered: {{"action":"{action}"}}')
        in_group = fake.find("sendMessage", chat_id=-3551) + fake.find("editMessageText", chat_id=-3551)
    assert in_group and all(url_buttons(call) == [] for call in in_group)
    assert all(lookalike not in call.text for call in in_group)
    assert page.requests == []


async def test_a_link_telegram_refuses_in_a_button_is_still_asked_with_the_link_in_the_text(
    tmp_path: Path,
) -> None:
    group = group_chat(-3561)
    async with bot_with_asking_server(tmp_path, group, 3561) as bot:
        fake, member = bot.fake, user(3562)
        fake.reject_button_urls = True
        mark = fake.mark()
        fake.send(group, "asking__link {}", sender=member)
        private = await fake.wait_reply(3562, "asking asks: Please log in", after=mark)
        assert private.status == 200
        assert f"\nLink: {LINK}\n" in private.text
        assert private.labels == ["Accept", "Decline", "Cancel"]
        refused = fake.find("sendMessage", after=mark, chat_id=3562)[0]
        assert (refused.status, url_buttons(refused)) == (400, [LINK])
        fake.press(private, "Accept", sender=member)
        result = await fake.wait_reply(-3561, "asking__link returned", after=mark)
    assert result.text.endswith('answered: {"action":"accept"}')
