"""A permission question in Telegram never holds up the chat's commands."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from .fake_bot_api import user
from .test_policies import GROUP, MEMBER, OWNER, bot_with_files, write_call

pytestmark = pytest.mark.anyio


async def test_while_a_permission_question_waits_the_groups_commands_run_and_the_owners_change_ends_it(
    tmp_path: Path,
) -> None:
    # An ask timeout far beyond the test's bound: only running beside the question answers in time.
    async with bot_with_files(tmp_path, environ={"PLAYA_ASK_TIMEOUT": "3600"}) as (fake, calls):
        mark = fake.mark()
        fake.send(GROUP, write_call(), sender=user(MEMBER))
        asked = await fake.wait_reply(OWNER, "The agent wants to call the tool write", after=mark)
        with anyio.fail_after(60):
            fake.send(GROUP, "/mcp_policy", sender=user(OWNER))
            listed = await fake.wait_reply(GROUP["id"], "Tools without a policy", after=mark)
            assert "files: ask" in listed.text
            # A member's owner-only command is refused at once and leaves the question waiting.
            fake.send(GROUP, "/mcp_policy files write allow", sender=user(MEMBER))
            await fake.wait_call(
                "sendMessage", after=mark, chat_id=GROUP["id"], where=lambda c: "owner" in c.text
            )
            assert calls == []
            # The owner's change keeps its place after the turn, and ends the question to get there.
            fake.send(GROUP, "/mcp_policy files write deny", sender=user(OWNER))
            await fake.wait_reply(GROUP["id"], "Policy of write of files: deny", after=mark)
            await fake.wait_call(
                "editMessageText", after=mark, where=lambda call: "No answer came" in call.text
            )
        fake.press(asked, "Allow once", sender=user(OWNER))  # too late: the question is over
        await fake.wait_call("answerCallbackQuery", after=mark)
    assert calls == []
