"""What the model is shown of a chat's servers: each server's state and the prompt section.

Every text here is built from what the chat holds (``ServersView``) and passes the chat's
redactor before it is cut: a cut first could keep the head of a credential. What the owner's
commands show (``/mcp_list``, ``/mcp_tools`` …) is written in ``commands._replies``.

The prompt section says a server's state in Playa's own words only (``RemoteServer.reason``):
what the server itself said of a failure (``RemoteServer.detail``) is shown to the owner, in
``/mcp_list`` and the reply to ``/mcp_add``, never to the model's prompt.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

from ..core import Redactor
from ._server import RemoteServer
from ._tool import RemoteMcpTool
from .store import Rejected, without_format

__all__ = ["SECTION_TITLE", "ServersView", "section", "state_text"]

SECTION_TITLE = "Remote MCP servers"
_SECTION_TOOLS = 30  # tool names listed per server in the prompt section; the model sees all of them as tools
_INSTRUCTIONS_SHOWN = 2000  # characters of a server's instructions in the prompt section


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
    if state.review.held:
        text += f"; {len(state.review.held)} new or changed tools wait for the owner's approval"
    if state.review.held_instructions is not None:
        text += "; its changed instructions wait for the owner's approval"
    if state.connection is None and state.reason:
        text += f" (last call failed: {state.reason}; the next call reconnects)"
    return text


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
    return state.review.prompt_instructions(redactor, _prompt_text)


def _prompt_text(instructions: str, redactor: Redactor) -> str:
    # Format characters go (a key split by a zero-width space is whole again, and redacted);
    # other control characters are spaces.
    text = without_format(instructions)
    text = "".join(c if c in "\n\t" or unicodedata.category(c)[0] != "C" else " " for c in text)
    text = redactor.redact("\n".join(line.rstrip() for line in text.strip().splitlines() if line.strip()))
    return text if len(text) <= _INSTRUCTIONS_SHOWN else text[: _INSTRUCTIONS_SHOWN - 1] + "…"


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
            if state.review.held:
                # A count only: a held tool's name and text are what the owner has not approved.
                lines.append(
                    f"  ({len(state.review.held)} new or changed tools of {name} wait for the owner's approval)"
                )
            if state.review.held_instructions is not None:
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
