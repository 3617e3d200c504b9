"""A panel: one message that shows the owner the state of what an extension manages, with actions.

An extension builds a ``Panel`` (the remote servers' ``/mcp``) and shows it through ``UI.panel``.
Each action is a command, as an approval's buttons are: a front end with buttons offers one per
action that runs its command as the owner; every other front end shows ``render_panel`` and the
owner types the command. So who may act, and what the action acts on, keep their one home: the
extension's command. An action's command names exactly what the panel showed (a server as it
was, by a tag), so a press on a panel shown before that thing changed acts on nothing.

Every text in a ``Panel`` is safe to show to the owner: the extension redacted it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Panel", "PanelAction", "PanelRow", "render_panel"]


@dataclass(frozen=True, slots=True)
class PanelAction:
    """One thing the owner may do from a panel: a button's label and the command it runs."""

    label: str
    command: str
    confirm: str | None = None
    """A question asked before the command runs (a removal): a front end with buttons asks it."""
    changes: bool = True
    """Whether it changes anything: an action that only shows (the tools) leaves the panel as it is."""


@dataclass(frozen=True, slots=True)
class PanelRow:
    """One thing a panel shows, its state in a line or two, and what may be done about it."""

    title: str
    state: str
    actions: tuple[PanelAction, ...] = ()


@dataclass(frozen=True, slots=True)
class Panel:
    """What the owner is shown: a heading, a row each, and a line after them."""

    source: str
    """What it shows (``mcp``): a newer panel of the same source replaces an older one."""
    heading: str
    rows: tuple[PanelRow, ...]
    note: str = ""


def render_panel(panel: Panel) -> str:
    """The text form, for a front end without buttons: each action as the command to type."""
    lines = [panel.heading]
    for row in panel.rows:
        lines.append("")
        lines.append(f"{row.title}: {row.state}")
        lines += [f"  {action.label}: {action.command}" for action in row.actions]
    if panel.note:
        lines += ["", panel.note]
    return "\n".join(lines)
