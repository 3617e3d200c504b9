"""The table of the owner's commands: each one's name, summary, usage, what the classifier asks of
its arguments (``carries_secret``), whether it only shows (``read_only``), and its handler.

``/mcp_policy`` and ``/mcp_list`` need no ``carries_secret`` of their own: a key-shaped word in
any command's arguments is the classifier's own finding.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ...core import Command
from ._access import ChatAccess, OpenServers
from ._add_request import USAGE, carries_secret
from ._audit_records import audit
from ._auth import auth
from ._call_policy import policy
from ._panel import PANEL_USAGE, PanelTags, panel, panel_carries_secret
from ._prompts import PROMPT_USAGE, PROMPTS_USAGE, list_prompts, run_prompt
from ._requests import AUDIT_SHOWN, AUTH_USAGE, POLICY_USAGE, auth_carries_secret, not_a_count, not_a_name
from ._servers import add, list_servers, list_tools, remove, restore
from ._tool_changes import decide, review

__all__ = ["build_commands"]

_DECISIONS = {
    "approve": "let the agent use a server's new or changed tools, as /mcp_review shows them",
    "reject": "keep a server's new or changed tools from the agent until they change again",
}


def _without_arguments(args: str) -> bool:
    """``read_only`` of a command that shows without arguments and changes the chat with them
    (the panel's actions, a policy's setting)."""
    return not args.strip()


# Long: one table, a Command a row, read as the list of the owner's commands.
def build_commands(open_servers: OpenServers, clock: Callable[[], float]) -> list[Command]:
    """The extension's commands; they work, and refuse clearly, even without a host secret."""
    access = ChatAccess(open_servers, clock)
    return [
        Command(
            "mcp",
            "the panel of the chat's servers: their state, and buttons to reconnect, log in, review, "
            "see the tools or remove each",
            partial(panel, access, PanelTags()),
            usage=PANEL_USAGE,
            carries_secret=panel_carries_secret,
            read_only=_without_arguments,
        ),
        Command(
            "mcp_add",
            "connect a remote MCP server to this chat",
            partial(add, access),
            usage=USAGE,
            carries_secret=carries_secret,
        ),
        Command(
            "mcp_auth",
            "log in to a remote MCP server that needs OAuth",
            partial(auth, access),
            usage=AUTH_USAGE,
            carries_secret=auth_carries_secret,
        ),
        Command(
            "mcp_remove",
            "disconnect a remote MCP server",
            partial(remove, access),
            usage="/mcp_remove <name>",
            carries_secret=not_a_name,
        ),
        Command(
            "mcp_list",
            "the chat's remote MCP servers and their state",
            partial(list_servers, access),
            usage="/mcp_list",
            read_only=True,
        ),
        Command(
            "mcp_audit",
            "the latest records of the chat's audit log: what was done with its servers and tools",
            partial(audit, access),
            usage=f"/mcp_audit [n] (default {AUDIT_SHOWN})",
            carries_secret=not_a_count,
            read_only=True,
        ),
        Command(
            "mcp_restore",
            "put back the last server file Playa saved, when it was rolled back, replaced or deleted",
            partial(restore, access),
            usage="/mcp_restore",
            carries_secret=not_a_name,
        ),
        Command(
            "mcp_review",
            "the new or changed tools of a server that wait for your decision",
            partial(review, access),
            usage="/mcp_review [name]",
            carries_secret=not_a_name,
            read_only=True,
        ),
        *(
            Command(
                f"mcp_{verb}",
                summary,
                partial(decide, access, approve=verb == "approve"),
                usage=f"/mcp_{verb} <name>",
                carries_secret=not_a_name,
            )
            for verb, summary in _DECISIONS.items()
        ),
        Command(
            "mcp_policy",
            "whether the agent may call a server's tools: allow, ask you first, or deny",
            partial(policy, access),
            usage=POLICY_USAGE,
            read_only=_without_arguments,
        ),
        Command(
            "prompts",
            "the prompts of the chat's remote MCP servers, which anyone here can run",
            partial(list_prompts, access),
            usage=PROMPTS_USAGE,
            owner_only=False,
            carries_secret=not_a_name,
            read_only=True,
        ),
        Command(
            "prompt",
            "run a prompt of a remote MCP server: its text becomes your message to the agent, marked as the server's",
            partial(run_prompt, access),
            usage=PROMPT_USAGE,
            owner_only=False,
        ),
        Command(
            "mcp_tools",
            "the tools of the chat's remote MCP servers",
            partial(list_tools, access),
            usage="/mcp_tools [name]",
            carries_secret=not_a_name,
            read_only=True,
        ),
    ]
