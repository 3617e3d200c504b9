"""The bot's parts that every chat shares, handed as one to what works with them."""

from __future__ import annotations

from dataclasses import dataclass

from ._answers import PendingAnswers
from ._approval_messages import ApprovalMessages
from ._buttons import Buttons
from ._deletions import Deletions
from ._outbox import Outbox
from ._panel import PanelMessages

__all__ = ["BotParts"]


@dataclass(frozen=True, eq=False)
class BotParts:
    """One of each for the whole bot: the dispatcher and every chat's UI use them."""

    outbox: Outbox
    answers: PendingAnswers
    buttons: Buttons
    approvals: ApprovalMessages
    deletions: Deletions
    panels: PanelMessages
