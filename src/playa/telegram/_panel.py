"""Panel messages (``/mcp``): one message to the chat's owner with a button per action.

As with approvals, a press decides nothing here: it hands the action's command (``/mcp remove
docs <tag>``) to the bot, which runs it as the owner through ``Host.handle`` in the chat the
servers belong to. The command checks that the sender is the chat's owner now and that the
server is still the one the panel showed (its tag); so a press on an old panel, after the server
was replaced, acts on nothing and says why.

A panel is sent to the owner's private chat with the bot, a group's too, and nowhere else: it
shows what servers said of their failures, which is the owner's to read. A newer panel of the
same chat takes the older one's buttons away. An action that changes something (reconnect, log
in, remove) spends the panel: its message becomes the action's reply, and ``/mcp`` shows the
panel as it is then. An action that only shows (tools, review) answers in a message of its own
and leaves the panel live. A removal asks first, in the panel's own message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from telegram import InlineKeyboardMarkup

from ..core import Panel, PanelAction, render_panel
from ._buttons import Buttons, Keyboard
from ._outbox import Outbox
from ._owner import CommandChat
from ._render import render
from ._split import Part

__all__ = ["ONLY_OWNER_PANEL", "PANEL_SUPERSEDED", "PanelMessages", "PanelPress", "ShownPanel"]

ONLY_OWNER_PANEL: Final = "Only the chat's owner can use this panel."
PANEL_SUPERSEDED: Final = "A newer panel of this chat was sent: use that one."
_KEEP: Final = "Keep it"
_PER_ROW: Final = 3


@dataclass(eq=False)
class ShownPanel:
    """One panel message whose buttons wait for the owner."""

    chat: CommandChat
    """Where its commands run; its message is in the owner's private chat."""
    panel: Panel
    text: Sequence[Part]
    message_id: int | None = None
    keyboard: Keyboard | None = None
    confirming: PanelAction | None = None
    """The action whose question the message asks now (a removal), waiting for yes or no."""

    @property
    def actions(self) -> list[PanelAction]:
        return [action for row in self.panel.rows for action in row.actions]


@dataclass(frozen=True, slots=True)
class PanelPress:
    """The owner chose an action: its command is to run in ``shown.chat`` as the owner."""

    shown: ShownPanel
    action: PanelAction


class PanelMessages:
    """The bot's live panels, one per chat."""

    def __init__(self, outbox: Outbox, buttons: Buttons, run: Callable[[PanelPress], None]) -> None:
        self._outbox = outbox
        self._buttons = buttons
        self._run = run
        self._shown: dict[int, ShownPanel] = {}

    async def show(
        self,
        panel: Panel,
        redact: Callable[[str], str],
        chat: CommandChat,
    ) -> int | None:
        """Send the panel of ``chat`` (redacted, its buttons under its last part) to the owner's
        private chat; its message id, or ``None`` when the owner cannot be reached there."""
        text = render(render_panel(panel), markdown=False, redact=redact)
        shown = ShownPanel(chat, panel, text)
        # Before any await: from here on the older panel's buttons do nothing.
        previous = self._shown.get(chat.chat_id)
        self._shown[chat.chat_id] = shown
        if previous is not None:
            self._end(previous)
        shown.keyboard = self._buttons.add(
            chat.owner_id, chat.owner_id, lambda key: self._pressed(shown, key), refusal=ONLY_OWNER_PANEL
        )
        if previous is not None and previous.message_id is not None:
            await self._outbox.edit(previous.chat.owner_id, previous.message_id, Part(PANEL_SUPERSEDED, []))
        # Not journaled: the buttons do not outlive a restart.
        message_id = await self._outbox.send(chat.owner_id, text, markup=self._markup(shown), durable=False)
        if message_id is None:
            self._end(shown)
            return None
        shown.message_id = message_id
        if self._shown.get(chat.chat_id) is not shown:  # a newer one came while this was being sent
            await self._outbox.edit(chat.owner_id, message_id, Part(PANEL_SUPERSEDED, []))
        return message_id

    async def close(self, shown: ShownPanel, text: Part) -> None:
        """An action that changed something ran: the message says ``text`` (its reply, redacted), without buttons."""
        if shown.message_id is not None:
            await self._outbox.edit(shown.chat.owner_id, shown.message_id, text)

    async def answer(self, shown: ShownPanel, text: Sequence[Part]) -> None:
        """An action that only shows ran: its reply (redacted) in a message of its own, beside the panel."""
        await self._outbox.send(shown.chat.owner_id, text, durable=False)

    def move(self, old_id: int, new_id: int) -> None:
        """A group became a supergroup: its panel's actions now run in the new chat."""
        shown = self._shown.pop(old_id, None)
        if shown is not None:
            shown.chat = shown.chat.moved(new_id)
            self._shown[new_id] = shown

    def _markup(self, shown: ShownPanel) -> InlineKeyboardMarkup:
        assert shown.keyboard is not None
        if shown.confirming is not None:
            return shown.keyboard.markup([[(shown.confirming.label, "yes"), (_KEEP, "no")]])
        rows: list[list[tuple[str, str]]] = []
        index = 0
        for row in shown.panel.rows:
            keys = [(action.label, str(index + i)) for i, action in enumerate(row.actions)]
            index += len(keys)
            rows += [keys[i : i + _PER_ROW] for i in range(0, len(keys), _PER_ROW)]
        return shown.keyboard.markup(rows)

    async def _pressed(self, shown: ShownPanel, key: str) -> None:
        """The owner pressed: a removal asks first; any other action goes to the chat's queue."""
        if shown.keyboard is None:
            return
        if key in ("yes", "no"):
            action, shown.confirming = shown.confirming, None
            if action is None or key == "no":
                await self._redraw(shown)
                return
        else:
            actions = shown.actions
            if not key.isdigit() or int(key) >= len(actions):
                return
            action = actions[int(key)]
            if action.confirm is not None:
                shown.confirming = action
                await self._redraw(shown, question=action.confirm)
                return
        if action.changes:
            # Spent: what it showed is about to change.
            self._end(shown)
        self._run(PanelPress(shown, action))

    async def _redraw(self, shown: ShownPanel, *, question: str | None = None) -> None:
        if shown.message_id is None or shown.keyboard is None:
            return
        last = shown.text[-1]
        text = Part(f"{last.text}\n\n{question}", list(last.entities)) if question else last
        await self._outbox.edit(shown.chat.owner_id, shown.message_id, text, markup=self._markup(shown))

    def _end(self, shown: ShownPanel) -> None:
        if shown.keyboard is not None:
            self._buttons.remove(shown.keyboard)
            shown.keyboard = None
        if self._shown.get(shown.chat.chat_id) is shown:
            del self._shown[shown.chat.chat_id]
