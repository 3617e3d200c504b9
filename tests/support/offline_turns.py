"""The owner's messages to a host on the offline model (``playa.agent.offline_model``), which calls
the tool a message names with the JSON after its name."""

from __future__ import annotations

import json

import anyio

from playa.agent import Host
from support.chat import ScriptedUI, msg


def call(tool: str, **arguments: object) -> str:
    """The message the offline model turns into a call of ``tool`` with ``arguments``."""
    return f"{tool} {json.dumps(arguments)}"


async def owner_says(host: Host, scope: str, text: str, *, within: float) -> str:
    """The owner's message to chat ``scope``, and its reply's text, which must come ``within`` seconds."""
    session = await host.session(scope, owner="owner")
    with anyio.fail_after(within):
        reply = await host.handle(session, msg(text), ScriptedUI())
    assert reply is not None
    return reply.text
