"""The owner's call policies: ``/mcp_policy`` lists them, or sets a server's or a tool's decision
(allow, ask, deny) or read-only mark."""

from __future__ import annotations

from ...core import CommandContext
from ...exceptions import StoreError
from .._chat import ChatServers
from ..store import Decision
from ._access import ChatAccess
from ._replies import no_such_server, policy_list
from ._requests import PolicyRequest

__all__ = ["policy"]

_POLICY_MEANS: dict[Decision, str] = {
    "allow": "the agent calls it at once",
    "ask": "each call waits for your decision",
    "deny": "the agent is not offered it",
}


async def policy(access: ChatAccess, ctx: CommandContext) -> str:
    chat = await access.servers(ctx)
    request = PolicyRequest.parse(ctx)
    if request is None:
        return policy_list(chat.servers, chat.policies.default, chat.redactor)
    if request.server.text not in chat.servers:
        return no_such_server(request.server)
    request.check()
    name, tool, mark, decision = request.server.text, request.tool, request.read_only, request.decision
    text: str | None
    try:
        if mark is not None:
            # ``read-only|not-read-only``: the owner's mark, sealed like a decision.
            was_marked = await chat.policies.mark(name, tool, mark)
            text = None if was_marked is None else _mark_text(name, tool, mark, was_marked)
        else:
            assert decision is not None
            before = await chat.policies.set(name, tool, decision)
            text = None if before is None else _decision_text(name, tool, decision, before)
    except StoreError as exc:
        return f"Nothing was changed: {exc}"
    if text is None:
        return no_such_server(request.server)
    return text + _unknown_tool(chat, name, tool)


def _decision_text(name: str, tool: str | None, decision: Decision, before: Decision) -> str:
    what = f"{tool} of {name}" if tool is not None else f"every tool of {name} without its own policy"
    return f"Policy of {what}: {decision} ({_POLICY_MEANS[decision]}); it was {before}."


def _mark_text(name: str, tool: str | None, read_only: bool, before: bool) -> str:
    what = f"{tool} of {name}" if tool is not None else f"every tool of {name} without its own mark"
    now, then = ("read-only" if mark else "not read-only" for mark in (read_only, before))
    means = (
        "data the agent read elsewhere in a turn may go into it without your decision"
        if read_only
        else "data the agent read elsewhere in a turn goes into it as the flow guard allows"
    )
    return f"Read-only mark of {what}: {now} ({means}); it was {then}."


def _unknown_tool(chat: ChatServers, name: str, tool: str | None) -> str:
    """A note when the server offers no tool named ``tool`` now (what was set waits for it)."""
    connection = state.connection if (state := chat.servers.get(name)) is not None else None
    if tool is not None and connection is not None and tool not in {t.name for t in connection.tools}:
        return f" {name} offers no tool named {tool} now: the policy applies if it comes."
    return ""
