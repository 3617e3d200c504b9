"""Changes an extension holds back until the chat's owner decides: what is shown, and how to answer.

A remote server may change what its tools say they do after the owner added it. The changed
tools wait; the owner is shown an ``Approval`` through ``UI.approval``. A front end with buttons
turns ``approve`` and ``reject`` into two buttons that run those commands, followed by
``digest``, as the owner; every other front end shows ``render_approval`` and the owner types
the command. Either way the decision is a command, so it has one home (the extension's command
handler) and one rule for who may make it (the owner only).

Every text in an ``Approval`` is safe to show: the extension redacted it with the chat's
credentials and stripped control characters before building the value. None is cut: an approval
shows every character of what it approves, and a front end shows all of it (split over several
messages if it must, the buttons under the last), since its ``digest`` covers exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Approval", "ToolChange", "render_approval"]


@dataclass(frozen=True, slots=True)
class ToolChange:
    """One tool that waits for the owner: new, or changed since the owner last approved it."""

    tool: str
    kind: Literal["new", "changed"]
    diff: tuple[str, ...] = ()
    """Lines saying what differs (``description: "…" → "…"``), each value whole, or all a new tool says."""
    what: Literal["tool", "prompt", "skill"] = "tool"
    """What kind of definition it is: a tool the model calls, a prompt a person runs, or a skill
    (instructions with files) the agent may load."""


@dataclass(frozen=True, slots=True)
class Approval:
    """Tool changes of one source (a remote server) that wait for the owner's decision."""

    source: str
    """What changed, in words: ``the remote MCP server docs``."""
    changes: tuple[ToolChange, ...]
    approve: str
    """The command that approves exactly these changes (``/mcp_approve docs``)."""
    reject: str
    """The command that rejects them (``/mcp_reject docs``)."""
    note: str = ""
    """A line after the changes: what happens meanwhile, what the commands do."""
    instructions: tuple[str, ...] = ()
    """Lines saying how the source's instructions to the agent changed, each whole; empty: they did not."""
    digest: str = ""
    """Names exactly these changes as shown here: ``approve`` or ``reject`` followed by it decides
    only while the changes are still these and would be shown so. A button pressed long after it was shown, after the server changed
    again, after a restart or a group's upgrade, cannot decide on changes its message did not show."""


def render_approval(approval: Approval) -> str:
    """The text form, for a front end without buttons (and the buttons' message text)."""
    counts = [
        f"{count} {kind}" if count == 1 else f"{count} {kind}s"
        for kind in ("tool", "prompt", "skill")
        if (count := sum(change.what == kind for change in approval.changes))
    ]
    if approval.instructions:
        counts.append("its instructions")
    what = " and ".join(counts)
    lines = [f"{approval.source} changed {what}; the agent cannot use them until you decide:"]
    if approval.instructions:
        lines.append("- its instructions to the agent (changed)")
        lines += [f"    {line}" for line in approval.instructions]
    for change in approval.changes:
        label = "" if change.what == "tool" else f"{change.what} "
        lines.append(f"- {label}{change.tool} ({change.kind})")
        lines += [f"    {line}" for line in change.diff]
    if approval.note:
        lines.append(approval.note)
    lines.append(f"{approval.approve} to approve, {approval.reject} to reject.")
    return "\n".join(lines)
