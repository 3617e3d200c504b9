"""What the host needs from a front end: send text, ask a question, show progress, delete a message, tell the members."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    # Only for annotations: _questions reads commands, whose context holds a UI.
    from ._approvals import Approval
    from ._panel import Panel
    from ._questions import Answer, Question

__all__ = ["UI", "Attachment", "IncomingMessage", "MessageRef", "Sender"]

MessageRef = Hashable
"""A front end's handle on a message it showed or received (a Telegram message id, say)."""


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent a message. Only the front end can tell whether that is the chat's owner."""

    id: str
    name: str
    is_owner: bool


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a person sent with a message, kept in the chat's workspace at ``path``."""

    path: str
    """Where it is in the workspace (``received/report.pdf``): what the agent is told."""
    media_type: str
    size: int
    image: bytes | None = field(default=None, repr=False)
    """The bytes of an image the model may be shown; None for any other file."""


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """One message from the chat, as the front end received it."""

    text: str
    sender: Sender
    ref: MessageRef | None = None
    attachments: tuple[Attachment, ...] = ()
    """Files that came with it (a photo, a document), already kept in the chat's workspace."""

    def __repr__(self) -> str:
        # The text may carry a credential (`/mcp_add … --bearer X`): never show it.
        return f"IncomingMessage(sender={self.sender.id!r}, {len(self.text)} chars, {len(self.attachments)} files)"


class UI(Protocol):
    """A chat's front end, as seen by the host, commands and extensions."""

    @property
    def private_place(self) -> str:
        """Where ``send_private`` shows text, as a reply says it: "above" where the chat is the
        sender's own (the console, a private chat), "in our private chat" from a group."""
        ...

    async def send(self, text: str) -> MessageRef | None:
        """Show text in the chat."""
        ...

    async def send_private(self, text: str) -> MessageRef | None:
        """Show text to the sender alone (an authorization link, say); ``None`` if it could not.

        The console is private already; Telegram sends it in the sender's private chat with the
        bot, never in a group.
        """
        ...

    async def ask(self, question: str, *, secret: bool = False, timeout: float = 300.0) -> str | None:
        """Ask the sender a question and return the answer, or ``None`` if none came.

        Only the asker's next plain message answers: a command never does (``/cancel`` ends
        the question with ``None``, as do a timeout and the end of input). With ``secret``, the
        answer goes only to the caller: it never enters the history, and the front end hides it
        as it is typed or deletes it from the chat.
        """
        ...

    async def question(self, question: Question, *, timeout: float = 300.0) -> Answer:
        """Ask the sender a server's question (``render_question`` shows it as text) and return the answer.

        Only the sender answers. Unanswered within ``timeout`` (``QUESTION_TIMEOUT``), at the end of input, or when the
        front end cannot ask, the answer is ``cancel``. The answer goes only to the caller.
        """
        ...

    async def progress(self, key: str, text: str) -> None:
        """Show how a long tool call is coming along: ``text`` replaces what ``key`` showed before.

        ``key`` names one call (progress of other calls shows beside it). The text is redacted
        already and one line. The caller sends the latest state only, one at a time per key, and
        never waits on the answer to go on with the call: a front end may take its time (the
        console redraws a status line; Telegram edits one message, at most every 2 s).
        """
        ...

    async def approval(self, approval: Approval) -> MessageRef | None:
        """Show the owner changes that wait for their decision (a server's changed tools).

        Shown to the owner only: the console is theirs, and a Telegram front end sends it to the
        owner's private chat with the bot. ``render_approval`` is the text form; a front end with
        buttons offers ``approval.approve`` and ``approval.reject`` as two buttons that run
        those commands as the owner. ``None`` if it could not be shown.
        """
        ...

    async def panel(self, panel: Panel) -> MessageRef | None:
        """Show the owner a panel (``/mcp``: the servers, their state, what may be done about each).

        Shown to the owner only, as an approval is: the console shows ``render_panel``; a Telegram
        front end sends one message to the owner's private chat with the bot (also for a group),
        with a button per action that runs its command as the owner. ``None`` if it could not be shown.
        """
        ...

    async def delete(self, ref: MessageRef) -> bool:
        """Delete a message from the chat; ``False`` if the front end could not."""
        ...

    async def notify(self, text: str) -> None:
        """Tell everyone in the chat of a change the owner made (a server added or removed).

        One line, never a URL or a credential. A front end whose chat has one person (the
        console, a private chat) may ignore it: the command's reply already said it.
        """
        ...
