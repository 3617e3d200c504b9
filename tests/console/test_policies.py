"""A call under ``ask`` in the console: the real ``playa chat`` in a pipe, answered with ``/allow`` or ``/deny``.

The call goes to the SDK's own server on loopback, which records every call that reaches it;
the offline model makes it. Commands that only show something still answer while it waits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from playa.core import NOTHING_TO_ANSWER
from servers.python_servers import serve_mcp
from support.files import ARGUMENTS, files_server

from .test_questions import Chat

pytestmark = pytest.mark.anyio


async def test_a_call_waits_for_allow_and_deny_keeps_it_from_the_server(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []
    async with (
        serve_mcp(files_server(calls)) as served,
        Chat("pipe").running(tmp_path / "data", tmp_path / "stderr.log") as chat,
    ):
        chat.say(f"/mcp_add files {served.url} --policy ask")
        mark = await chat.wait_for("Added files: connected")
        chat.say(f"files__write {json.dumps(ARGUMENTS)}")
        asked = await chat.wait_for(
            "The agent wants to call the tool write of the remote MCP server files", after=mark
        )
        await chat.wait_for("/allow always", after=asked)
        assert json.dumps(ARGUMENTS, indent=2) in chat.out[asked:]
        assert calls == []
        # A command that only shows runs beside the waiting call; the list of policies is one.
        chat.say("/mcp_policy")
        listed = await chat.wait_for("files: ask", after=asked)
        assert calls == []
        chat.say("/allow")
        wrote = await chat.wait_for("files__write returned:\nwrote", after=listed)
        assert calls == [ARGUMENTS]

        chat.say(f"files__write {json.dumps({'path': 'b', 'text': 'second'})}")
        again = await chat.wait_for("The agent wants to call the tool write", after=wrote)
        chat.say("/deny")
        await chat.wait_for("files__write was not called: the owner declined.", after=again)
        chat.say("/allow")
        await chat.wait_for(NOTHING_TO_ANSWER, after=again)
    assert calls == [ARGUMENTS]
