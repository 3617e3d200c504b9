"""Approval messages: changes that wait for the chat's owner, shown with Approve and Reject buttons.

A press decides nothing here. It hands the approval's command (``/mcp_approve docs``, followed
by the approval's digest) to the bot, which runs it as the owner through ``Host.handle`` in the chat the servers belong to, as if
the owner had typed it there. So who may decide, and the refusal of tools that changed again
since they were shown, keep their one home: the extension's command.

The buttons live until pressed, or until a newer approval of the same source supersedes them;
not across a restart (a press then does nothing, and the owner is shown the changes again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ..core import Approval, render_approval
from ._buttons import Buttons, Keyboard
from ._outbox import Outbox
from ._owner import CommandChat
from ._render import render
from ._split import Part

__all__ = [
    "APPROVE",
    "ONLY_OWNER",
    "REJECT",
    "SUPERSEDED",
    "ApprovalMessages",
    "ApprovalPress",
    "WaitingApproval",
]

APPROVE: Final = "Approve"
REJECT: Final = "Reject"
ONLY_OWNER: Final = "Only the chat's owner can decide."
SUPERSEDED: Final = (
    "This message is superseded: the tools changed again since, and the newer message shows them as "
    "they are now. Decide there."
)


@dataclass(eq=False)
class WaitingApproval:
    """One approval message whose buttons wait for the owner."""

    chat: CommandChat
    """Where its commands run: a group's upgrade moves it."""
    source: str
    """What it approves (its approve command): a newer approval of the same source supersedes it."""
    commands: Mapping[str, str]
    """Button key → the command it runs."""
    where: int = 0
    """The chat that shows the message: the owner's private chat, or the chat itself."""
    message_id: int | None = None
    keyboard: Keyboard | None = None
    superseded: bool = False


@dataclass(frozen=True, slots=True)
class ApprovalPress:
    """The owner pressed a button: ``command`` is to run in ``waiting.chat`` as the owner."""

    waiting: WaitingApproval
    command: str = field(repr=False)


class ApprovalMessages:
    """The bot's approval messages that wait for a press, one per chat and source."""

    def __init__(self, outbox: Outbox, buttons: Buttons, decide: Callable[[ApprovalPress], None]) -> None:
        self._outbox = outbox
        self._buttons = buttons
        self._decide = decide
        self._waiting: dict[tuple[int, str], WaitingApproval] = {}

    async def show(
        self,
        approval: Approval,
        redact: Callable[[str], str],
        chat: CommandChat,
    ) -> int | None:
        """Send the approval (redacted) with the buttons under its last message; that message's id, or ``None``.

        It goes to the owner's private chat with the bot, else to the chat itself. An older
        message of the same source loses its buttons and says it is superseded.
        """
        # Whole, over as many messages as it takes: what is cut away could not be approved.
        text = render(render_approval(approval), markdown=False, redact=redact)
        waiting = WaitingApproval(
            chat,
            approval.approve,
            # With the digest: the press decides on exactly what this message shows, or nothing.
            {
                "approve": f"{approval.approve} {approval.digest}",
                "reject": f"{approval.reject} {approval.digest}",
            },
        )
        # Before any await: from here on a press of the older message's buttons does nothing.
        previous = self._waiting.get((chat.chat_id, waiting.source))
        self._waiting[(chat.chat_id, waiting.source)] = waiting
        if previous is not None:
            self._end(previous)
            previous.superseded = True
        keyboard = waiting.keyboard = self._buttons.add(
            chat.owner_id, chat.owner_id, lambda key: self._pressed(waiting, key), refusal=ONLY_OWNER
        )
        markup = keyboard.markup([[(APPROVE, "approve"), (REJECT, "reject")]])
        if previous is not None and previous.message_id is not None:
            await self._outbox.edit(previous.where, previous.message_id, Part(SUPERSEDED, []))
        # Not journaled: the buttons do not outlive a restart.
        message_id = await self._outbox.send(chat.owner_id, text, markup=markup, durable=False)
        if message_id is None and chat.chat_id != chat.owner_id:
            keyboard.chat_id = chat.chat_id
            message_id = await self._outbox.send(
                chat.chat_id, text, thread_id=chat.thread_id, markup=markup, durable=False
            )
        if message_id is None:
            self._end(waiting)
            return None
        waiting.where, waiting.message_id = keyboard.chat_id, message_id
        if waiting.superseded:  # a newer one came while this was being sent
            await self._outbox.edit(waiting.where, message_id, Part(SUPERSEDED, []))
        return message_id

    async def close(self, waiting: WaitingApproval, text: Part) -> None:
        """Its decision is made: the message says ``text`` (the command's reply, redacted), without buttons."""
        self._end(waiting)
        if waiting.message_id is not None:
            await self._outbox.edit(waiting.where, waiting.message_id, text)

    def move(self, old_id: int, new_id: int) -> None:
        """A group became a supergroup: its waiting approvals now decide in the new chat."""
        for (chat_id, source), waiting in list(self._waiting.items()):
            if chat_id == old_id:
                del self._waiting[(chat_id, source)]
                waiting.chat = waiting.chat.moved(new_id)
                self._waiting[(new_id, source)] = waiting

    def _pressed(self, waiting: WaitingApproval, key: str) -> None:
        """The owner pressed: the buttons are spent, and the command goes to the chat's queue."""
        command = waiting.commands.get(key)
        if command is None or waiting.keyboard is None:
            return
        self._buttons.remove(waiting.keyboard)
        waiting.keyboard = None
        self._decide(ApprovalPress(waiting, command))

    def _end(self, waiting: WaitingApproval) -> None:
        if waiting.keyboard is not None:
            self._buttons.remove(waiting.keyboard)
            waiting.keyboard = None
        key = (waiting.chat.chat_id, waiting.source)
        if self._waiting.get(key) is waiting:
            del self._waiting[key]
