"""Photos and documents people send: kept in the chat's workspace with safe names and within the cap,
withheld when they hold a key, and given to the model as part of the person's turn."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from playa.core import ATTACHMENT_FOLDER, scope_folder
from playa.telegram import TelegramSettings
from support.providers import ProviderRequest, serve_provider, text
from support.telegram import DEMO_TOKEN, FAST, Running, demo_added, running_bot

from .fake_bot_api import owned_group, private_chat, user

pytestmark = pytest.mark.anyio

# The smallest valid PNG: one transparent pixel.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
JPEG = b"\xff\xd8\xff\xe0" + b"\x00\x10JFIF\x00" + bytes(range(256)) * 4 + b"\xff\xd9"
KEY = "sk-proj-" + "Q7vR2mXk9LpT4wZs8NcB1yHd6FgJ3aE5uK0oWi"


def workspace(bot: Running, chat_id: int) -> Path:
    return bot.host.config.data_dir / "workspaces" / scope_folder(f"telegram:{chat_id}")


def received(bot: Running, chat_id: int) -> dict[str, bytes]:
    folder = workspace(bot, chat_id) / ATTACHMENT_FOLDER
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.exists() else {}


def user_content(request: ProviderRequest) -> Any:
    """The content of the last user message of an OpenAI Chat Completions request."""
    return [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]


async def test_a_photo_is_kept_in_the_workspace_and_the_model_gets_it_as_an_image_with_the_caption(
    tmp_path: Path,
) -> None:
    async with serve_provider() as provider:
        provider.script(text("a tiny picture"))
        async with running_bot(tmp_path, model=provider.model("openai-chat")) as bot:
            fake = bot.fake
            message_id = fake.send_file(
                private_chat(101), JPEG, sender=user(101), photo=True, caption="what is this?"
            )
            await fake.wait_reply(101, "a tiny picture")
            name = f"photo-{message_id}.jpg"
            assert received(bot, 101) == {name: JPEG}

    [request] = provider.requests
    content = user_content(request)
    [words] = [part["text"] for part in content if part["type"] == "text"]
    assert words.startswith("what is this?")
    assert f"{ATTACHMENT_FOLDER}/{name}" in words
    assert "image/jpeg" in words
    [image] = [part["image_url"]["url"] for part in content if part["type"] == "image_url"]
    assert image == "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()


async def test_a_document_without_a_caption_is_a_turn_and_the_agent_is_told_where_it_is(
    tmp_path: Path,
) -> None:
    async with serve_provider() as provider:
        provider.script(text("noted"), text("noted again"))
        async with running_bot(tmp_path, model=provider.model("openai-chat")) as bot:
            fake = bot.fake
            fake.send_file(
                private_chat(102), b"col\n1\n", sender=user(102), name="data.csv", mime_type="text/csv"
            )
            await fake.wait_reply(102, "noted")
            mark = fake.mark()
            # The same name again is kept beside the first, never over it.
            fake.send_file(
                private_chat(102), b"col\n2\n", sender=user(102), name="data.csv", mime_type="text/csv"
            )
            await fake.wait_reply(102, "noted again", after=mark)
            assert received(bot, 102) == {"data.csv": b"col\n1\n", "data-2.csv": b"col\n2\n"}

    first, second = (user_content(r) for r in provider.requests)
    # Not an image: a note only, text for every model.
    assert isinstance(first, str)
    assert f"{ATTACHMENT_FOLDER}/data.csv" in first
    assert "text/csv, 6 bytes" in first
    assert f"{ATTACHMENT_FOLDER}/data-2.csv" in second


@pytest.mark.parametrize(
    ("sent_name", "kept"),
    [
        ("../../.volcanic/servers.json", "servers.json"),
        (".volcanic", "volcanic"),
        ("..", "file-{id}"),
        ("report\u202egpj.exe", "reportgpj.exe"),
        ("a/b\\c:d*e?.txt", "c_d_e_.txt"),
        ("x" * 300 + ".pdf", "x" * 76 + ".pdf"),
        (f"{KEY}.txt", "file-{id}"),
    ],
)
async def test_a_documents_name_is_made_safe_and_never_reaches_the_hosts_folder(
    tmp_path: Path, sent_name: str, kept: str
) -> None:
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        mark = fake.mark()
        message_id = fake.send_file(private_chat(103), b"plain words", sender=user(103), name=sent_name)
        await fake.wait_call("sendMessage", after=mark, chat_id=103)
        assert received(bot, 103) == {kept.format(id=message_id): b"plain words"}
        host_folder = workspace(bot, 103) / ".volcanic"
        assert not host_folder.exists() or not any(host_folder.rglob("servers.json"))
        assert KEY not in "".join(fake.texts(103))


async def test_a_file_over_the_cap_is_refused_with_a_clear_reply_and_nothing_is_kept(tmp_path: Path) -> None:
    settings = TelegramSettings(poll_timeout=FAST.poll_timeout, typing_interval=1.0, max_file=1000)
    async with running_bot(tmp_path, settings=settings) as bot:
        fake = bot.fake
        fake.send_file(private_chat(104), b"x" * 2000, sender=user(104), name="big.bin")
        reply = await fake.wait_reply(104, "too large")
        assert "up to 1 kB" in reply.text
        assert "Nothing of it was kept" in reply.text
        # Refused on the size Telegram states, before a byte is taken.
        assert not fake.find("getFile") and not fake.find("download")

        # A size stated too small does not get more than the cap in either.
        mark = fake.mark()
        fake.send_file(private_chat(104), b"y" * 2000, sender=user(104), name="liar.bin", size=10)
        await fake.wait_reply(104, "too large", after=mark)
        assert received(bot, 104) == {}
        assert not [t for t in fake.texts(104) if "[offline model]" in t]


async def test_a_document_holding_a_key_is_deleted_and_withheld_like_a_message_holding_one(
    tmp_path: Path,
) -> None:
    async with (
        serve_provider() as provider,
        running_bot(tmp_path, model=provider.model("openai-chat")) as bot,
    ):
        fake = bot.fake
        mark = fake.mark()
        message_id = fake.send_file(
            private_chat(105),
            f"# settings\nOPENAI_API_KEY={KEY}\n".encode(),
            sender=user(105),
            name="settings.env",
            mime_type="text/plain",
            caption="please look at my settings",
        )
        await fake.wait_call("deleteMessage", after=mark, chat_id=105, message_id=message_id)
        reply = await fake.wait_reply(105, "holds a credential", after=mark)
        assert "rotate" in reply.text
        assert received(bot, 105) == {}
    # No turn ran: the model never saw the caption, the file or its name.
    assert provider.requests == []


async def test_a_binary_file_holding_a_credential_the_chat_knows_is_withheld(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        await demo_added(bot, 106)
        mark = fake.mark()
        blob = b"\x00\x01PK\x03\x04" + b"token=" + DEMO_TOKEN.encode() + b"\xff\xfe"
        fake.send_file(private_chat(106), blob, sender=user(106), name="dump.bin")
        await fake.wait_reply(106, "holds a credential", after=mark)
        assert received(bot, 106) == {}


async def test_a_caption_is_classified_like_a_message_a_key_alone_is_refused_and_a_command_runs_alone(
    tmp_path: Path,
) -> None:
    async with running_bot(tmp_path) as bot:
        fake = bot.fake
        mark = fake.mark()
        message_id = fake.send_file(private_chat(107), JPEG, sender=user(107), photo=True, caption=KEY)
        await fake.wait_call("deleteMessage", after=mark, chat_id=107, message_id=message_id)
        await fake.wait_reply(107, "looks like a key", after=mark)

        mark = fake.mark()
        fake.send_file(private_chat(107), JPEG, sender=user(107), photo=True, caption="/help")
        await fake.wait_reply(107, "/mcp_add", after=mark)
        # Neither file was kept: the key's message is withheld whole, the command's file is not the agent's.
        assert received(bot, 107) == {}


async def test_a_group_members_photo_is_kept_in_the_groups_workspace(tmp_path: Path) -> None:
    async with running_bot(tmp_path) as bot:
        fake, group = bot.fake, owned_group(bot.fake, -1701, 1702)
        mark = fake.mark()
        fake.send_file(group, PNG, sender=user(1703), name="dot.png", mime_type="image/png")
        await fake.wait_call("sendMessage", after=mark, chat_id=-1701)
        assert received(bot, -1701) == {"dot.png": PNG}
