"""What people and the model are shown of a chat's servers: states, the prompt section, ``/mcp_list``, ``/mcp_tools``.

Every text here is built from what the chat holds (``ServersView``) and passes the chat's
redactor before it is cut: a cut first could keep the head of a credential.

The prompt section says a server's state in Playa's own words only (``RemoteServer.reason``):
what the server itself said of a failure (``RemoteServer.detail``) is shown to the owner, in
``/mcp_list`` and the reply to ``/mcp_add``, never to the model's prompt.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

from ..core import Redactor
from ._server import LoginStart, RemoteServer
from ._tool import RemoteMcpTool
from .store import AuditRecord, Decision, Rejected, shown_name, without_format
from .transport import duration_text

__all__ = [
    "SECTION_TITLE",
    "ServersView",
    "added_text",
    "login_started",
    "notice",
    "policy_list",
    "said",
    "section",
    "server_list",
    "state_text",
    "tool_list",
]

SECTION_TITLE = "Remote MCP servers"
_SECTION_TOOLS = 30  # tool names listed per server in the prompt section; the model sees all of them as tools
_INSTRUCTIONS_SHOWN = 2000  # characters of a server's instructions in the prompt section
_LIST_LIMIT = 100
_NAME_SHOWN = 40
_NAME_SCAN = 4096  # of a name: enough to hold any key, bounded whatever the file holds
_REJECTED_SHOWN = 20


class ServersView(Protocol):
    """What the texts read of a chat's servers (``ChatServers`` is one)."""

    @property
    def servers(self) -> Mapping[str, RemoteServer]: ...
    @property
    def rejected(self) -> tuple[Rejected, ...]: ...
    @property
    def warning(self) -> str | None: ...
    @property
    def redactor(self) -> Redactor: ...
    def withheld(self, state: RemoteServer) -> list[tuple[str, str]]: ...
    def tool(self, exposed: str) -> RemoteMcpTool | None: ...


def state_text(state: RemoteServer, now: float | None = None) -> str:
    """The server's state in Playa's words; with ``now`` (the clock), also when it is retried next.

    The prompt gets it without ``now``: the wait changes every second, and would defeat
    prompt caching. Never what the server said (``said``): this is what the prompt carries.
    """
    if state.status == "connecting":
        return "connecting"
    if state.status == "unavailable":
        return f"unavailable: {state.reason}{_retry_text(state, now)}"
    text = f"connected over {state.transport}, {len(state.tools)} tools"
    if state.hidden:
        text += f" ({state.hidden} more not exposed: choose with --tools)"
    if state.withheld:
        text += f"; {len(state.withheld)} withheld: " + "; ".join(state.withheld)
    if state.held:
        text += f"; {len(state.held)} new or changed tools wait for the owner's approval"
    if state.held_instructions is not None:
        text += "; its changed instructions wait for the owner's approval"
    if state.connection is None and state.reason:
        text += f" (last call failed: {state.reason}; the next call reconnects)"
    return text


def said(state: RemoteServer) -> str:
    """What the server said of its failure, as the owner is shown it after the state; "" when nothing."""
    return f" (the server said: {state.detail})" if state.detail else ""


def _retry_text(state: RemoteServer, now: float | None) -> str:
    if state.next_retry is None or now is None:
        return ""
    wait = max(0, round(state.next_retry - now))
    at = datetime.fromtimestamp(state.next_retry, UTC).strftime("%H:%M:%S UTC")
    return f"; next retry at {at} (in {wait} s)"


def _instructions(state: RemoteServer, redactor: Redactor) -> str:
    """The server's instructions for the prompt: control characters gone, redacted, then cut.

    Redacted before the cut (a cut first could keep the head of a credential); the model-bound
    gate redacts the whole prompt again. Made once per connection and redactor, not every turn.
    """
    made = state.instructions_shown
    if made is not None and made[0] is state.instructions and made[1] is redactor:
        return made[2]
    # Format characters go (a key split by a zero-width space is whole again, and redacted);
    # other control characters are spaces.
    text = without_format(state.instructions or "")
    text = "".join(c if c in "\n\t" or unicodedata.category(c)[0] != "C" else " " for c in text)
    text = redactor.redact("\n".join(line.rstrip() for line in text.strip().splitlines() if line.strip()))
    text = text if len(text) <= _INSTRUCTIONS_SHOWN else text[: _INSTRUCTIONS_SHOWN - 1] + "…"
    state.instructions_shown = (state.instructions, redactor, text)
    return text


def section(chat: ServersView) -> str | None:
    """The "Remote MCP servers" prompt section, or None when there is nothing to say."""
    if not chat.servers and not chat.rejected and not chat.warning:
        return None
    lines = ["Servers the chat's owner connected (only the owner can add, change or remove them):"]
    for name, state in sorted(chat.servers.items()):
        if state.status == "connected":
            withheld = {tool for tool, _ in chat.withheld(state)}
            usable = [tool for tool in state.tools if tool not in withheld]
            shown = ", ".join(usable[:_SECTION_TOOLS])
            more = len(usable) - _SECTION_TOOLS
            shown += f", and {more} more" if more > 0 else ""
            lines.append(f"- {name}: available, {len(usable)} tools ({shown})")
            if instructions := _instructions(state, chat.redactor):
                lines.append(f"  {name}'s own instructions (the server's words, not the owner's):")
                lines += [f"    {line}" for line in instructions.splitlines()]
            if state.held:
                # A count only: a held tool's name and text are what the owner has not approved.
                lines.append(
                    f"  ({len(state.held)} new or changed tools of {name} wait for the owner's approval)"
                )
            if state.held_instructions is not None:
                # Never their text: it is what the owner has not approved.
                lines.append(f"  (changed instructions of {name} wait for the owner's approval)")
        else:
            lines.append(f"- {name}: {state_text(state)}")
    if chat.rejected:
        # A count, never the names: whoever wrote the file chose them, and they would sit in
        # the prompt every turn (a 1 MB name, or 15,000 entries, or an instruction).
        count = len(chat.rejected)
        entries = "1 entry" if count == 1 else f"{count} entries"
        lines.append(f"- {entries} of servers.json failed verification; the owner sees them in /mcp_list")
    if chat.warning:
        lines.append(f"- servers.json cannot be used: {chat.warning}")
    return chat.redactor.redact("\n".join(lines))


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
