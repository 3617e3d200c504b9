"""Extensions: objects with hooks the host calls at fixed points of a chat's life."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._commands import Command
from ._tools import ToolResult

if TYPE_CHECKING:
    from ._session import ChatSession
    from ._ui import Sender

__all__ = ["Extension", "ToolResultEvent"]


@dataclass(slots=True)
class ToolResultEvent:
    """One tool result of a chat, on its way to the model.

    Every result passes here — from every tool, errors included — so a handler that rewrites
    ``result`` decides what the model sees.
    """

    session: ChatSession
    tool_name: str
    arguments: dict[str, Any]
    result: ToolResult


class Extension:
    """Base class of extensions; every hook is optional.

    A hook that raises is logged and contained: the chat goes on without it.
    """

    id: str = "extension"

    @property
    def min_hook_timeout(self) -> float:
        """Seconds its hooks may need at most (its own bounds); the host's hook bound is raised to it."""
        return 0.0

    def commands(self) -> Sequence[Command]:
        """Commands to register with the host (asked once, at host start)."""
        return ()

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Held open while the host runs; its exit is the host-shutdown hook."""
        yield

    async def on_session_start(self, session: ChatSession) -> None:
        """A chat session became active. Must not wait on the network: start work and return."""

    def session_opening(self, session: ChatSession) -> Callable[[], None] | None:
        """Blocking file work for a session being opened (reading what SessionStart needs), or None.

        The host runs the callable returned in a worker thread, in the one hop of the open that
        also makes the chat's workspace folder and reads its history, before SessionStart. The
        callable must not touch the event loop. One that raises is logged and contained.
        """
        return None

    async def on_before_agent_start(self, session: ChatSession) -> None:
        """Before every agent turn; may await bounded work and set prompt sections."""

    async def on_tool_result(self, event: ToolResultEvent) -> None:
        """Every tool result of the chat before the model sees it; may replace ``event.result``.

        It runs on every call's path: it must be quick and must not wait on I/O. If it raises,
        the result is withheld from the model. Redaction is not its job: the model-bound gate
        redacts everything the model receives.
        """

    def on_turn_end(self, session: ChatSession) -> None:
        """A turn of the chat ended (answered, failed or stopped): let go of what was its alone.

        Called in the turn's ``finally``, also when it was cancelled: it must not wait on anything.
        """

    def on_secret_deleted(self, session: ChatSession, sender: Sender, deleted: bool) -> None:
        """A message of the chat that carries a secret was deleted (``deleted``), or could not be.

        ``sender`` sent it; its text is never given. Called once the deletion ended: it must
        not wait on anything (an audit log records it).
        """

    async def on_login_redirect(self, session: ChatSession, sender: Sender, address: str) -> str | None:
        """The chat's owner sent, as a message, the address a login ended at (``…?code=…&state=…``).

        The message never reaches the model or the history. An extension whose login waits for
        this address completes it and returns what to tell the owner; None when it is not its.
        """
        return None

    def credentials(self, session: ChatSession) -> Collection[str]:
        """Every credential value this extension knows for the chat (header values, URL secrets…).

        The host redacts them, in every encoding, from everything the model receives, every
        reply, the stored history and every log record. Return the same object while nothing
        changed: the host rebuilds the chat's redactor only when it gets a different one.
        """
        return frozenset()

    async def on_scope_move(self, old_scope: str, session: ChatSession) -> None:
        """The chat's folders moved from ``old_scope`` to ``session.scope`` (a new chat id).

        What the extension bound to the old scope (a seal, say) must be bound to the new one
        now: the host calls this once the folders are in place and before SessionStart. The
        chat's files are in ``session``'s workspace and private folder.
        """

    async def on_session_close(self, session: ChatSession) -> None:
        """The session is closing (host shutdown, or the chat was idle); let go of its state.

        The chat's next message opens a new session (SessionStart again), never before this
        hook returned.
        """
