"""The flow guard in Telegram: by default a group's calls that carry another server's data wait
for the owner, and a private chat's go through, logged.

The bot runs for real against the fake Bot API; both servers are the SDK's own on loopback, the
model is scripted to obey the hostile page.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from servers.python_servers import serve_mcp
from support.chat import Script
from support.flows import hostile_server, notes_server, obeying_steps
from support.telegram import running_bot

from .fake_bot_api import creator, group_chat, private_chat, user

pytestmark = pytest.mark.anyio


async def test_a_flow_goes_through_in_a_private_chat_and_waits_for_the_owner_in_a_group(
    tmp_path: Path,
) -> None:
    written: list[str] = []
    script = Script(obeying_steps(["page"]) + obeying_steps(["page"]))
    group, owner, member = group_chat(-4701), user(4701), user(4702)
    with anyio.fail_after(120):
        async with (
            serve_mcp(hostile_server()) as fetcher,
            serve_mcp(notes_server(written)) as notes,
            # The ask timeout is what is under test here: nobody answers the owner's question.
            running_bot(tmp_path, model=script.model(), environ={"PLAYA_ASK_TIMEOUT": "1"}) as bot,
        ):
            fake = bot.fake
            fake.administrators[group["id"]] = [creator(owner)]
            for chat in (private_chat(4701), group):
                for name, served in (("fetcher", fetcher), ("notes", notes)):
                    mark = fake.mark()
                    fake.send(chat, f"/mcp_add {name} {served.url}", sender=owner)
                    await fake.wait_reply(chat["id"], f"Added {name}", after=mark)
            mark = fake.mark()
            fake.send(private_chat(4701), "what is new today?", sender=owner)
            await fake.wait_reply(4701, "done: saved", after=mark)
            assert len(written) == 1 and "Hollowbrook closes" in written[0]
            mark = fake.mark()
            fake.send(group, "what is new today?", sender=member)
            await fake.wait_reply(-4701, "notes__write was not called: the owner did not answer", after=mark)
    assert len(written) == 1
    # The owner was asked, privately, with what came from where; the member never was.
    asked = [text for text in fake.texts(4701, after=mark) if "notes" in text]
    assert asked and "text from fetcher" in asked[0]
    assert not fake.texts(4702)
