"""How a command reaches the chat's servers: the one service it calls, picked up afresh."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ...core import ChatSession, CommandContext
from ...exceptions import UsageError
from .._chat import ChatServers
from .._server import RemoteServer
from ._replies import no_such_server
from ._requests import ServerName

__all__ = ["ChatAccess", "OpenServers", "server_named", "words_privately"]

OpenServers = Callable[[ChatSession], Awaitable[ChatServers]]
"""The chat's servers for an owner's command, picked up afresh from the file (``UsageError``
when remote MCP is disabled): the one service the commands call."""


@dataclass(frozen=True, slots=True)
class ChatAccess:
    """What every handler is given: the way to the chat's servers, and the clock."""

    open_servers: OpenServers
    clock: Callable[[], float]

    async def servers(self, ctx: CommandContext, *, announce: bool = True) -> ChatServers:
        """The chat's servers; for the owner, what waited for them is shown first (``announce``).

        A review or a decision shows them itself (``announce`` False): a change the owner is
        shown by the command that approves it must not count as seen.
        """
        chat = await self.open_servers(ctx.session)
        if ctx.is_owner:
            # Where tool changes reach the owner from now on; and what waited for them, now.
            await chat.review.owner_seen(ctx.ui, announce=announce)
        return chat


def server_named(chat: ChatServers, name: ServerName, usage: str) -> RemoteServer:
    """The server ``name`` names; ``UsageError`` with the usage when none is given, or saying so."""
    if not name.text:
        raise UsageError(f"usage: {usage}")
    state = chat.servers.get(name.text)
    if state is None:
        raise UsageError(no_such_server(name))
    return state


async def words_privately(ctx: CommandContext, words: str) -> str:
    """Send what servers said to the owner's private chat; the note for the group's reply."""
    if await ctx.ui.send_private(words) is None:
        return "\nWhat the server said is not shown here; start a private chat with me to get it there."
    return "\nWhat the server said went to your private chat."
