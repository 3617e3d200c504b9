"""The prompts of one chat's servers: listed, held until the owner approves them, rendered for a person.

A server's prompt is text the server writes and a person runs (``/prompt``): its rendered
messages become that person's turn, marked as the server's. So the rule of authority applies to
its definition, as to a tool's: the first listing of a server is adopted (the owner added it as
it is), and a prompt that is new or changed since waits for the owner (``/mcp_review``,
``/mcp_approve``). Only a prompt whose definition is the approved one is rendered, checked
against a listing made at the moment it runs: a server that changed it since it was last listed
gets it held, and nothing of its text reaches the model.

What it renders may differ from call to call (it is the server's answer to the person's
arguments); it enters the model's request as the person's message, in a frame that names the
server and the prompt, with every credential the chat knows removed and its length bounded, and
the flow guard counts it as the server's text for the turn.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, replace
from functools import partial
from typing import Final

import mcp_types

from ..core import Media, looks_like_credential, one_line
from ..exceptions import RemoteError, StoreError, UsageError
from ..mcp import map_result
from ._listings import ServerListings
from ._prompt_review import PromptHold
from ._review import Review
from ._server import ChatContext, RemoteServer
from .store import Pins, prompt_digest
from .transport import (
    Connection,
    complete_argument,
    get_prompt,
    list_prompts,
    offers_completions,
    offers_prompts,
)

__all__ = ["MAX_PROMPT_CHARS", "ChatPrompts", "RenderedPrompt"]

logger = logging.getLogger(__name__)

MAX_PROMPT_CHARS: Final = 100_000
"""Characters of a rendered prompt the model gets at most (then a note says it was cut)."""
MAX_SUGGESTIONS: Final = 8
"""Completion values shown with a question for an argument."""
_SUGGESTION_CHARS: Final = 60


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    """A prompt as its server rendered it for one run: the person's turn, and what it is made of."""

    server: str
    name: str
    text: str
    """The frame and every message, redacted and bounded: what the model gets as the person's message."""
    media: tuple[Media, ...]
    """Images and audio of its messages, attached to the turn."""
    messages: int

    def __repr__(self) -> str:
        return (
            f"RenderedPrompt({self.server!r}, {self.name!r}, {len(self.text)} chars, {len(self.media)} media)"
        )


class ChatPrompts(ServerListings):
    """The prompts of one chat's servers: what can run, what waits, and each run's rendering."""

    kind = "prompts"

    def __init__(self, context: ChatContext, review: Review) -> None:
        super().__init__(context, review)
        self._followed: dict[str, Connection] = {}
        self.rendered: tuple[str, str] | None = None
        """The latest rendering not yet seen by a turn (server, text): the flow guard's source."""

    # Listing

    async def connected(self, server: RemoteServer, adopted: Pins | None) -> Pins | None:
        """A server bound its connection: its prompt changes are followed from now on; the pins to save.

        Pins without prompts (a server just added, or an entry from before prompts were pinned)
        take the prompts listed now, saved with the tool pins an add adopts (returned), or on
        their own: the owner added the server as it is. Otherwise nothing is listed here: a run
        lists them (and checks them) anyway, and a change the server announces is listed then.
        """
        connection = server.connection
        name = server.entry.name
        if connection is None or self._followed.get(name) is connection:
            return adopted  # bound again on the same connection (a tools change): already followed
        self._followed[name] = connection
        server.review.prompts.forget()
        if not offers_prompts(connection):
            return adopted
        connection.follow_prompts(partial(self._heard, server, connection))
        pins = adopted if adopted is not None else server.entry.pins
        if pins is None or pins.prompts is not None or pins.instructions is None:
            return adopted
        try:
            offered = await list_prompts(connection, timeout=self._timeout)
        except RemoteError as exc:
            # Adopted at the next listing instead (a run, or a change the server announces).
            logger.info("%s: listing the prompts of %s failed: %s", self._context.session.scope, name, exc)
            return adopted
        pins = replace(pins, prompts=server.review.prompts.hold(pins, offered))
        if adopted is not None:
            return pins
        try:
            await server.save_pins(pins)
        except StoreError as exc:
            logger.warning(
                "could not save the prompt pins of %s in %s: %s", name, self._context.session.scope, exc
            )
        return None

    def _heard(self, server: RemoteServer, connection: Connection) -> None:
        """The server said its prompts changed: list them again on ``connection`` in the background
        (never connecting: a dropped one is let be), and tell the owner of what waits."""
        if server.current and server.connection is connection:
            self._context.task_group.start_soon(self._refresh, server, connection)

    async def listing(self, server: RemoteServer, on: Connection | None = None) -> PromptHold:
        """List the server's prompts now and hold them against the pins: what can run, and what waits.

        A first listing is adopted and saved; a new or changed prompt is shown to the owner.
        ``on``: only on this connection, if it is still the server's (else nothing is listed).
        Raises ``ToolError`` when the server is unavailable, ``RemoteError`` when it failed.
        """
        async with self._lock(server):
            if on is None:
                connection = await server.connection_for_call()
            elif server.current and server.connection is on and not on.broken:
                connection = on
            else:
                return server.review.prompts
            hold = server.review.prompts
            if not offers_prompts(connection):
                hold.hold(server.entry.pins, ())
                return hold
            offered = await self._asked(server, connection, list_prompts(connection, timeout=self._timeout))
            adopted = hold.hold(server.entry.pins, offered)
            if adopted is not None and (pins := self._tools_pinned(server)) is not None:
                await server.save_pins(replace(pins, prompts=adopted))
        await self._review.announce_waiting(server)
        return hold

    async def runnable(self, server: RemoteServer, name: str) -> mcp_types.Prompt:
        """The approved definition of the server's prompt ``name``, as listed now.

        Raises ``UsageError`` saying why it cannot run (unknown, or waiting for the owner).
        """
        hold = await self.listing(server)
        prompt = hold.live.get(name)
        if prompt is not None:
            return prompt
        shown = self._redact(one_line(name))[:80]
        if name in hold.held:
            raise UsageError(
                f"The prompt {shown} of {server.entry.name} is new or changed since the owner approved "
                f"its prompts, so it cannot run until they approve it (/mcp_review {server.entry.name})."
            )
        raise UsageError(f"{server.entry.name} has no prompt {shown} that can run; /prompts lists them.")

    # Running

    async def suggestions(
        self, server: RemoteServer, prompt: str, argument: str, given: dict[str, str]
    ) -> list[str]:
        """The server's completions of an argument, cleaned for a person ([] when it offers none or fails)."""
        connection = server.connection
        if connection is None or connection.broken or not offers_completions(connection):
            return []
        try:
            completion = await complete_argument(
                connection, prompt, argument, "", given, timeout=self._timeout
            )
        except RemoteError as exc:
            logger.info(
                "%s: completing %s of %s failed: %s", self._context.session.scope, argument, prompt, exc
            )
            return []
        shown = [
            self._redact(one_line(value))[:_SUGGESTION_CHARS] for value in completion.values[:MAX_SUGGESTIONS]
        ]
        return [value for value in shown if value and not looks_like_credential(value)]

    async def render(
        self, server: RemoteServer, approved: mcp_types.Prompt, arguments: dict[str, str]
    ) -> RenderedPrompt:
        """The server's rendering of an approved prompt with ``arguments``, framed, redacted and bounded.

        Its definition is checked against the approved one once more, now: a server that changed
        it while the person answered gets it held, and nothing is rendered. Raises ``UsageError``
        when it cannot run, ``RemoteError`` when the server failed.
        """
        current = await self.runnable(server, approved.name)
        if prompt_digest(current) != prompt_digest(approved):
            raise UsageError(
                f"The prompt {approved.name} of {server.entry.name} changed while you answered; run it again."
            )
        connection = await server.connection_for_call()
        result = await self._asked(
            server, connection, get_prompt(connection, approved.name, arguments, timeout=self._timeout)
        )
        rendered = self._framed(server.entry.name, approved.name, arguments, result)
        self.rendered = (server.entry.name, rendered.text)
        return rendered

    def _framed(
        self, server: str, name: str, arguments: dict[str, str], result: mcp_types.GetPromptResult
    ) -> RenderedPrompt:
        """The messages as the person's turn: a frame of Playa's words, each message marked with its role.

        The frame ends at a line that names a random mark the server could not know when it
        rendered its text: text of the server's that closes the frame itself, to speak as the
        person after it, does not end it.
        """
        given = ", ".join(f"{key}={value}" for key, value in arguments.items())
        mark = secrets.token_hex(4)
        head = (
            f"[The person ran /prompt {server} {name}{' with ' + given if given else ''}. What follows, up "
            f'to the line "[end of the prompt {mark}]", is the prompt "{name}" of the remote MCP server '
            f"{server}, as that server rendered it: the server's text, not the person's own words. The "
            "person asked for it to be run.]"
        )
        parts = [head]
        media: list[Media] = []
        for message in result.messages:
            mapped = map_result(mcp_types.CallToolResult(content=[message.content]))
            parts.append(f"[{message.role} message of the prompt]\n{mapped.text}")
            media.extend(mapped.media)
        # Redacted before it is cut: a cut first could keep the head of a credential.
        text = self._redact("\n\n".join(parts))
        if len(text) > MAX_PROMPT_CHARS:
            text = (
                f"{text[:MAX_PROMPT_CHARS]}\n[prompt cut: the server rendered {len(text):,} characters; "
                f"this is the first {MAX_PROMPT_CHARS:,}]"
            )
        text += f"\n\n[end of the prompt {mark}]"
        return RenderedPrompt(server, name, text, tuple(media), len(result.messages))

    def take_rendered(self) -> tuple[str, str] | None:
        """The rendering a turn is about to get (server, text), once: the flow guard's source."""
        rendered, self.rendered = self.rendered, None
        return rendered
