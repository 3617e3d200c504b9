"""What the owner's commands answer: the lists (``/mcp_list``, ``/mcp_tools``, ``/mcp_policy``,
``/mcp_audit``), the reply to an add, a login started, and the notices the chat's members get.

Built from what the chat holds (``ServersView``); every text that quotes what a server or a file
said passes the chat's redactor before it is cut: a cut first could keep the head of a credential.
What a server said of a failure (``RemoteServer.detail``) is the owner's to read: a group's reply
leaves it out (``words=False``) and the owner gets it privately.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence

from ...core import Redactor
from .._callback_listener import duration_text
from .._server import LoginStart, RemoteServer
from .._views import ServersView, state_text
from ..store import AuditRecord, Decision, Rejected, Saved, shown_name
from ._requests import ServerName

__all__ = [
    "added_text",
    "audit_text",
    "login_started",
    "no_such_server",
    "notice",
    "policy_list",
    "server_list",
    "server_words",
    "tool_list",
    "with_notes",
]

_LIST_LIMIT = 100
_NAME_SHOWN = 40
_NAME_SCAN = 4096  # of a name: enough to hold any key, bounded whatever the file holds
_REJECTED_SHOWN = 20


def no_such_server(name: ServerName) -> str:
    """The reply to a name no server has. Only a well-formed name is quoted back: anything else
    may be a key typed in the wrong place."""
    if name.key:
        return "That looks like a key, not a server name (not repeated here). /mcp_list shows the names."
    shown = f"named {name.text!r}" if name.quotable else "by that name"
    return f"There is no server {shown}. /mcp_list shows them."


def with_notes(text: str, saved: Saved) -> str:
    """``text`` after what the write had to move out of the way, so the owner knows where it went."""
    return "\n".join([*(f"Note: {note}." for note in saved.notes), text])


def said(state: RemoteServer) -> str:
    """What the server said of its failure, as the owner is shown it after the state; "" when nothing."""
    return f" (the server said: {state.detail})" if state.detail else ""


def server_words(chat: ServersView) -> str | None:
    """What each server said of its failure, for the owner's private chat; None when none said anything."""
    lines = [
        f"{name}: the server said: {state.detail}"
        for name, state in sorted(chat.servers.items())
        if state.detail
    ]
    return "\n".join(lines) if lines else None


def server_list(chat: ServersView, now: float, *, words: bool = True) -> str:
    """``/mcp_list``: every server with its state, URL (secrets hidden) and headers' names; the ignored entries.

    ``words=False`` leaves out what the servers said of their failures (a group sees the reply:
    the server's words go to the owner privately, :func:`server_words`)."""
    if not chat.servers and not chat.rejected and not chat.warning:
        return "No remote MCP servers. Add one with /mcp_add <name> <url> [--bearer]."
    lines: list[str] = []
    for name, state in sorted(chat.servers.items()):
        entry = state.entry
        auth = ", ".join(entry.header_names) if entry.header_names else "none"
        tools = "all" if entry.tools is None else ", ".join(entry.tools)
        transport: str = entry.transport
        if state.transport is not None:
            # What the last connection that worked spoke: the fallback and the version show.
            transport += f" (in use: {state.transport}, protocol {state.protocol or 'unknown'})"
        lines.append(f"{name}: {state_text(state, now)}")
        if state.detail and words:
            lines.append(f"  the server said: {state.detail}")
        lines += [
            f"  url: {entry.shown_url}",
            f"  transport: {transport}; tools: {tools}; auth headers: {auth}",
        ]
        lines += [f"  withheld from the model: {tool}: {why}" for tool, why in chat.withheld(state)]
    for rejected in chat.rejected[:_REJECTED_SHOWN]:
        label = _rejected_label(rejected, chat.redactor)
        lines.append(f"{label}: ignored: {rejected.reason}. Remove it, or add it again with /mcp_add.")
    if (more := len(chat.rejected) - _REJECTED_SHOWN) > 0:
        lines.append(f"… and {more} more ignored entries.")
    if chat.warning:
        lines.append(f"servers.json cannot be used: {chat.warning}")
    return "\n".join(lines)


def tool_list(chat: ServersView, name: str | None, now: float) -> str:
    """``/mcp_tools``: each tool's exposed name and the first line of its description (of one server, or all)."""
    lines: list[str] = []
    for server, state in sorted(chat.servers.items()):
        if name is not None and server != name:
            continue
        if not state.tools:
            lines.append(f"{server}: no tools ({state_text(state, now)})")
        for exposed in state.tools:
            tool = chat.tool(exposed)
            # Redacted before the cut: a cut first could keep the head of a credential.
            summary = chat.redactor.redact(tool.description).splitlines()[0][:120] if tool else ""
            lines.append(f"{exposed} — {summary}")
        lines += [f"{server}: not offered to the agent: {why}" for why in state.withheld]
    return "\n".join(lines) or "No remote MCP servers. Add one with /mcp_add."


def policy_list(servers: Mapping[str, RemoteServer], default: Decision, redactor: Redactor) -> str:
    """``/mcp_policy``: each server's call policy and its tools' own, the owner's read-only marks,
    and the default for the rest."""
    lines = [f"Tools without a policy of their own or their server's: {default} (the host's default)."]
    for name, state in sorted(servers.items()):
        policy = state.entry.policy
        server = f"{policy.server}" if policy.server is not None else f"{default} (the default)"
        if policy.read_only is not None:
            server += ", read-only" if policy.read_only else ", not read-only"
        lines.append(f"{name}: {server}")
        for tool in sorted({*policy.tools, *policy.read_only_tools}):
            said: list[str] = [policy.tools[tool]] if tool in policy.tools else []
            if (mark := policy.read_only_tools.get(tool)) is not None:
                said.append("read-only" if mark else "not read-only")
            # A name "always" took from the server: one line, as its approval showed it.
            lines.append(f"  {shown_name(tool, redactor.redact)}: {', '.join(said)}")
    if not servers:
        lines.append("No remote MCP servers. Add one with /mcp_add <name> <url> [--policy ask].")
    else:
        lines.append(
            "Change one with /mcp_policy <name> [tool] allow|ask|deny, or read-only|not-read-only "
            "(data read elsewhere in a turn may go into a read-only tool without your decision)."
        )
    return redactor.redact("\n".join(lines))


def login_started(name: str, start: LoginStart, place: str, timeout: float) -> str:
    """What the owner's command says of the login it started: the link sent and where, or why not.

    ``place`` is where the front end shows private text (``UI.private_place``).
    """
    if start.sent:
        return (
            f"I sent you the link to log in to {name} {place}: it works for {duration_text(timeout)}. "
            "I say here when the login is done; the chat goes on meanwhile."
        )
    if start.why is not None:
        return start.why
    return (
        f"Preparing the login to {name} takes longer than usual: the link comes to you {place} when "
        "it is ready, or I say here why not."
    )


def added_text(verb: str, name: str, state: RemoteServer, now: float, *, words: bool = True) -> str:
    """The reply to an ``/mcp_add`` that saved the entry, by the state it reached (``words``: as in
    :func:`server_list`)."""
    if state.status == "connected":
        shown = ", ".join(state.tools[:_LIST_LIMIT]) or "none"
        return f"{verb} {name}: {state_text(state, now)}: {shown}."
    told = said(state) if words else ""
    return f"{verb} {name}, but it is {state_text(state, now)}{told}. /mcp_list shows its state."


def _rejected_label(rejected: Rejected, redactor: Redactor) -> str:
    """A rejected entry's name as whoever wrote the file chose it: made safe to show, and short.

    Control and format characters go (a name could rewrite the terminal or hide text), then the
    chat's credentials, then the rest is cut: redacting first, so a cut never leaves part of a key.
    """
    if rejected.name is None:
        return f"entry #{rejected.index + 1}"
    name = "".join(
        c for c in rejected.name[:_NAME_SCAN] if unicodedata.category(c)[0] not in "CZ" or c == " "
    )
    name = redactor.redact(name)
    name = name if len(name) <= _NAME_SHOWN else name[: _NAME_SHOWN - 1] + "…"
    return f"{name!r} (entry #{rejected.index + 1})"


def notice(change: str, name: str, tools: int | None) -> str:
    """What the chat's members are told of a change: the server's name and tool count, never its URL or auth.

    ``tools`` is None for a server that is not connected (yet).
    """
    text = f"The chat's owner {change} the remote MCP server {name}"
    if change == "removed":
        return text + (f"; its {tools} tools are gone." if tools else ".")
    if tools is not None:
        return text + f": the agent can use its {tools} tools."
    return text + ": the agent can use its tools once it connects."


def audit_text(records: Sequence[tuple[AuditRecord, bool]] | None) -> str:
    """The latest records of the chat's audit log, one a line, for ``/mcp_audit`` (None: it has none);
    one whose MAC does not verify (edited, forged, or another chat's) is marked."""
    if records is None:
        return "This chat has no audit log: remote MCP is disabled, or the host keeps no private folder."
    if not records:
        return "The audit log of this chat is empty."
    return "\n".join(
        [
            f"The latest {len(records)} record(s) of this chat's audit log:",
            *(r.shown() if ok else f"{r.shown()} (does not verify)" for r, ok in records),
        ]
    )
