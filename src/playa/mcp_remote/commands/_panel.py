"""``/mcp``: the panel of the chat's servers, and the actions its buttons run.

``/mcp`` shows every server with its state and what may be done about it (``UI.panel``: the
owner's private chat on Telegram). Each action is ``/mcp <verb> <name> <tag>``, where the tag
names the server exactly as the panel showed it: its name, URL, transport, tools, auth and
header values, under a key of this process. A server removed or replaced since (another URL, a
new key) has another tag, so an old panel's button acts on nothing; a restart makes every old
tag stale, as it makes an approval's buttons. The verbs run the owner's commands of the same
name (``/mcp_auth``, ``/mcp_review``, ``/mcp_tools``, ``/mcp_remove``), so each rule keeps one home.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field, replace
from typing import Final

from ...core import CommandContext, Panel, PanelAction, PanelRow
from ...exceptions import UsageError
from ...mcp import is_server_name
from .._chat import ChatServers
from .._server import RemoteServer
from .._views import state_text
from ..store import ServerEntry
from ._access import ChatAccess
from ._auth import auth
from ._replies import said, server_list
from ._servers import list_tools, remove
from ._tool_changes import review

__all__ = ["PANEL_USAGE", "PanelTags", "panel", "panel_carries_secret"]

PANEL_USAGE: Final = "/mcp shows the panel of the chat's servers; its buttons run /mcp <action> <name> <tag>"
VERBS: Final = ("reconnect", "login", "review", "tools", "remove")
_TAG_CHARS: Final = 12
_STALE: Final = (
    "The panel that action came from showed another server by that name, or one that is gone: "
    "nothing was done. Send /mcp for the panel as it is now."
)


@dataclass(frozen=True, slots=True)
class PanelTags:
    """Tags that name a server as a panel showed it.

    Keyed (HMAC-SHA256) with a random key of this process: the tag covers the header values, and an
    unkeyed hash of a short key could be tried against guesses.
    """

    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    def tag(self, entry: ServerEntry) -> str:
        shown = [
            entry.name,
            entry.url,
            entry.transport,
            entry.tools,
            entry.auth_kind,
            entry.secret_url,
            sorted(entry.headers.items()),
        ]
        digest = hmac.new(self.key, json.dumps(shown).encode(), hashlib.sha256).hexdigest()
        return digest[:_TAG_CHARS]


def panel_carries_secret(args: str) -> bool:
    """Whether ``/mcp``'s arguments may be something other than an action of a panel (a key, say)."""
    words = args.split()
    if not words or words == ["help"]:
        return False
    if len(words) != 3:
        return True
    verb, name, tag = words
    return verb not in VERBS or not is_server_name(name) or not _is_tag(tag)


def _is_tag(word: str) -> bool:
    return len(word) == _TAG_CHARS and all(c in "0123456789abcdef" for c in word)


async def panel(access: ChatAccess, tags: PanelTags, ctx: CommandContext) -> str:
    chat = await access.servers(ctx)
    words = ctx.args.split()
    if not words:
        return await _show(access, tags, ctx, chat)
    if len(words) != 3 or words[0] not in VERBS:
        raise UsageError(f"usage: {PANEL_USAGE}")
    verb, name, tag = words
    server = chat.servers.get(name)
    if server is None or not hmac.compare_digest(tags.tag(server.entry), tag):
        return _STALE
    if verb == "reconnect":
        server = await chat.reconnect(name)
        return f"{name}: {state_text(server, access.clock())}{said(server)}"
    handler = {"login": auth, "review": review, "tools": list_tools, "remove": remove}[verb]
    # The owner's command of the same name, on the name alone: its checks and words are the ones.
    return await handler(access, replace(ctx, args=name))


async def _show(access: ChatAccess, tags: PanelTags, ctx: CommandContext, chat: ChatServers) -> str:
    """Show the panel to the owner; the reply says where it went, or is the list when it could not go."""
    now = access.clock()
    rows = tuple(_row(state, tags.tag(state.entry), now) for _, state in sorted(chat.servers.items()))
    notes: list[str] = []
    if chat.rejected:
        notes.append(f"{len(chat.rejected)} entries of servers.json are ignored: /mcp_list shows them.")
    if chat.warning:
        notes.append(f"servers.json cannot be used: {chat.warning}")
    if not rows:
        notes.append("No remote MCP servers. Add one with /mcp_add <name> <url> [--bearer].")
    shown = Panel(
        "mcp",
        "The chat's remote MCP servers:",
        rows,
        chat.redactor.redact(" ".join(notes)),
    )
    if await ctx.ui.panel(shown) is None:
        if ctx.session.group:
            return "I could not send you the panel: start a private chat with me, then send /mcp again."
        return server_list(chat, now)
    if ctx.session.group:
        return f"The panel of this chat's servers is {ctx.ui.private_place}."
    return ""


def _row(state: RemoteServer, tag: str, now: float) -> PanelRow:
    """A server's row: its state (with what the server said: the panel is the owner's alone) and actions."""
    name = state.entry.name

    def action(label: str, verb: str, *, confirm: str | None = None, changes: bool = True) -> PanelAction:
        return PanelAction(label, f"/mcp {verb} {name} {tag}", confirm=confirm, changes=changes)

    actions = [action(f"Reconnect {name}", "reconnect")]
    if state.needs_login or state.entry.auth_kind == "oauth":
        actions.append(action(f"Log in to {name}", "login"))
    if state.review.held or state.review.held_instructions is not None:
        actions.append(action(f"Review {name}", "review", changes=False))
    if state.tools or state.withheld:
        actions.append(action(f"Tools of {name}", "tools", changes=False))
    actions.append(
        action(
            f"Remove {name}",
            "remove",
            confirm=f"Remove {name}? The agent loses its tools, and this host forgets its keys.",
        )
    )
    return PanelRow(name, f"{state_text(state, now)}{said(state)}", tuple(actions))
