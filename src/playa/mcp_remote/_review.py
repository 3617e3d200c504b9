"""What waits for the owner's decision: a server's new or changed tools and instructions.

The model never gets a tool or instructions the owner did not approve: new and changed ones are
held back, shown to the owner (at most once per approval interval while undecided), reviewed
with ``/mcp_review`` and decided with ``/mcp_approve`` or ``/mcp_reject``.

The owner is shown every character that changed, never a part: a change whose approval would
be longer than ``APPROVAL_LIMIT`` is rejected unseen, and the owner is told why. What a decision
decides is named by the approval's digest, which covers the definitions and exactly what was
shown of them.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Final

import mcp_types

from ..core import UI, Approval, render_approval
from ..exceptions import StoreError
from ._server import ChatContext, RemoteServer, wait_for_connects
from .store import (
    Pins,
    PromptPins,
    same_definitions,
    shown_names,
)

__all__ = ["APPROVAL_LIMIT", "Review"]

logger = logging.getLogger(__name__)

APPROVAL_LIMIT: Final = 32_000
"""Characters of one approval's text (``render_approval``) at most: about eight Telegram messages.

What waits from a server is shown whole or not at all; a change too large to read through is
rejected rather than approved on a part (a server could hide its instruction at the end)."""


def _decided(
    name: str,
    tools: list[mcp_types.Tool],
    instructions: bool,
    prompts: list[mcp_types.Prompt],
    *,
    approve: bool,
) -> str:
    """The reply to the owner's decision on a server's held tools, instructions and prompts."""
    text = _decided_tools(name, tools, instructions, approve=approve) if tools or instructions else ""
    if prompts:
        names = ", ".join(sorted(prompt.name for prompt in prompts))
        text += (
            f"{' ' if text else ''}{'Approved' if approve else 'Rejected'} {len(prompts)} prompt(s) of "
            f"{name}: {names}. "
            + (
                "They can be run now (/prompts)."
                if approve
                else "They stay held until the server changes them again."
            )
        )
    return text


def _decided_tools(name: str, tools: list[mcp_types.Tool], instructions: bool, *, approve: bool) -> str:
    """The reply to the owner's decision on a server's held tools and instructions."""
    names = ", ".join(sorted(tool.name for tool in tools))
    if approve:
        if not tools:
            return f"Approved the new instructions of {name}: the agent gets them from now on."
        also = ", and its new instructions" if instructions else ""
        return f"Approved {len(tools)} tool(s) of {name}: {names}{also}. The agent can use them now."
    if not tools:
        return (
            f"Rejected the new instructions of {name}: the agent keeps what you approved before "
            "until the server changes them again."
        )
    also = ", and its new instructions" if instructions else ""
    return (
        f"Rejected {len(tools)} tool(s) of {name}: {names}{also}. They stay hidden until the server "
        "changes them again."
    )


class Review:
    """The owner's review of one chat's servers: what waits is shown to them, and decided by them.

    What waits of each server is that server's ``ServerReview``; this tells the owner (through
    the front end of their latest command) and carries out their decisions.
    """

    def __init__(self, context: ChatContext) -> None:
        self._session = context.session
        self._servers = context.servers
        self._interval = context.settings.approval_interval
        """Seconds between two messages about one server while the first is undecided."""
        self._connect_wait = context.settings.connect_wait
        self._clock = context.clock
        self._redact = context.secrets.redact
        self._audit = context.audit
        self.owner_ui: UI | None = None
        """The front end of the owner's latest command: where tool changes are shown to them."""
        self._untold: list[str] = []
        """What the owner must hear once a front end of theirs is known (``owner_seen``)."""

    async def settle(self, server: RemoteServer, adopted: Pins | None) -> None:
        """After a bind: save an adopted list, and tell the owner of tools that wait for them."""
        name = server.entry.name
        quiet = server.review.take_quiet()
        if adopted is not None:
            tools_too = server.entry.pins is None
            try:
                await server.save_pins(adopted)
            except StoreError as exc:
                # Held in memory meanwhile; the next connect adopts and tries to save again.
                logger.warning("could not save the tool pins of %s in %s: %s", name, self._session.scope, exc)
            else:
                if not quiet:
                    await self._tell_adopted(name, adopted, tools_too=tools_too)
        if self._untold_change(server):
            await self._announce(server)

    async def announce_waiting(self, server: RemoteServer) -> None:
        """Tell the owner of what of the server waits for them, unless they were shown it as it is."""
        if self._untold_change(server):
            await self._announce(server)

    async def _tell_adopted(self, name: str, pins: Pins, *, tools_too: bool) -> None:
        """Tell the owner that an entry from before pins took what its server offers now as approved."""
        instructions = pins.instructions_text is not None
        if tools_too:
            count = len(pins.tools)
            what = f"{count} tool{'' if count == 1 else 's'}" + (
                " and its instructions" if instructions else ""
            )
            await self._tell(
                f"{name} was saved before Playa pinned tool definitions: its current {what} are "
                "pinned now, and a change to any of them will wait for your approval."
            )
        elif instructions:
            await self._tell(
                f"{name} was saved before Playa pinned server instructions: its current instructions "
                "are pinned now, and a change to them will wait for your approval."
            )

    # Showing

    def approval(self, server: RemoteServer) -> Approval | None:
        """What the owner is shown of the server's held tools and instructions (redacted, cut), or None when none wait."""
        return server.review.approval(server.entry, self._redact)

    def _untold_change(self, server: RemoteServer) -> bool:
        """Whether what waits of the server differs from what the owner was last shown of it."""
        if not server.review.waiting:
            return False
        approval = self.approval(server)
        return (approval.digest if approval is not None else None) != server.review.shown

    async def _refuse_unshowable(self, server: RemoteServer, approval: Approval) -> str | None:
        """Reject what waits when its approval is too long to show whole; what to tell the owner (None: it fits)."""
        size = len(render_approval(approval))
        if size <= APPROVAL_LIMIT:
            return None
        name = server.entry.name
        skills = len(server.review.skills.held)
        tools, instructions, prompts = await self._conclude(server, approve=False)
        what = (
            [f"{len(tools)} tool(s) ({shown_names((tool.name for tool in tools), self._redact)})"]
            if tools
            else []
        )
        what += ["its instructions"] if instructions is not None else []
        what += [f"{len(prompts)} prompt(s)"] if prompts else []
        what += [f"{skills} skill(s)"] if skills else []
        logger.info("%s: a change of %s too large to show was rejected", self._session.scope, name)
        return (
            f"{name} changed {' and '.join(what)}, but the change is too large to show you in full "
            f"({size:,} characters; an approval shows at most {APPROVAL_LIMIT:,}), so it was rejected "
            "unseen: the agent does not get it, and a changed tool stays hidden until the server "
            f"changes it again. To take the server as it is now, remove it (/mcp_remove {name}) and add "
            "it again: an add takes its tools as they are then."
        )

    async def show(self, server: RemoteServer) -> Approval | str | None:
        """What of the server waits for the owner, now counted as shown; None when nothing does.

        A text instead when it was too large to show: it was rejected, and the text says so.
        """
        approval = self.approval(server)
        if approval is None:
            return None
        if (refused := await self._refuse_unshowable(server, approval)) is not None:
            return refused
        server.review.saw(approval.digest)
        return approval

    async def _announce(self, server: RemoteServer) -> None:
        """Show the owner what of the server waits for them, at most once per interval while undecided.

        What is too large to show is rejected at once instead, and the owner told.
        """
        approval = self.approval(server)
        ui = self.owner_ui
        if approval is None:
            return
        if (refused := await self._refuse_unshowable(server, approval)) is not None:
            await self._tell(refused)
            return
        if ui is None:
            # No front end of the owner's known yet (after a restart): they hear it with their
            # next command, and /mcp_list says so meanwhile.
            logger.info("%s: tool changes of %s wait for the owner", self._session.scope, server.entry.name)
            return
        if not server.review.announce(approval.digest, self._clock(), self._interval):
            # The owner has an undecided message about this server: the newest state waits for
            # the next message, /mcp_review, or the decision.
            logger.debug("%s: a further change of %s waits silently", self._session.scope, server.entry.name)
            return
        try:
            await ui.approval(approval)
            server.review.announced_as(approval.digest)
        except Exception as exc:  # boundary: a front end's failure must not stop the server's tools
            server.review.announced_as(None)  # not shown: the next change may try again
            logger.warning(
                "could not show the owner the tool changes of %s: %s", server.entry.name, type(exc).__name__
            )

    async def _tell(self, text: str) -> None:
        """Tell the owner ``text`` (redacted); kept for their next command while no front end of theirs is known."""
        ui = self.owner_ui
        if ui is None:
            self._untold.append(text)
            return
        try:
            await ui.send(self._redact(text))
        except Exception as exc:  # boundary: a front end's failure must not stop the server's tools
            logger.warning("could not tell the owner of %s: %s", self._session.scope, type(exc).__name__)

    async def owner_seen(self, ui: UI, *, announce: bool = True) -> None:
        """The owner ran a command through ``ui``: tell them what waited for them, and remember it.

        With ``announce`` False, held tools are not shown (the command shows them itself).
        """
        self.owner_ui = ui
        untold, self._untold = self._untold, []
        for text in untold:
            await self._tell(text)
        if not announce:
            return
        for server in list(self._servers.values()):
            if self._untold_change(server):
                await self._announce(server)

    # Deciding

    async def decide(self, name: str, *, approve: bool, digest: str | None = None) -> str:
        """The owner's ``/mcp_approve`` or ``/mcp_reject``: of exactly the held tools they were shown.

        ``digest`` names what was shown (an ``Approval``'s); without it, what this chat showed last.
        """
        # A server reconnecting (a restart, a group's upgrade) lists its tools.
        await wait_for_connects(self._servers, self._connect_wait)
        server = self._servers.get(name)
        if server is None:
            return f"No remote MCP server is named {name} any more."
        approval = self.approval(server)
        if approval is None:
            return f"No tool changes of {name} wait for a decision."
        if (refused := await self._refuse_unshowable(server, approval)) is not None:
            return refused
        decides = server.review.shown if digest is None else digest
        if approval.digest != decides:
            # A server that changes again between the review and the decision must not get its
            # newest text approved unseen; nor may a view that showed it otherwise (an older
            # message, one from before a restart) approve it.
            what = (
                "are shown differently now than"
                if decides is not None and same_definitions(decides, approval.digest)
                else "changed again since"
            )
            if digest is not None and self.owner_ui is not None:
                # A button of an older message: the newest state comes as a message of its own,
                # with its own buttons, now (the owner asked: the bounded stream does not apply),
                # unless one did already (the server reconnected on the way, and said so).
                if server.review.messaged != approval.digest:
                    server.review.reopen()
                    await self._announce(server)
                return (
                    f"The tools of {name} {what} that message was shown, so nothing was "
                    "decided: the newest message shows them as they are now."
                )
            server.review.saw(approval.digest)
            return f"The tools of {name} {what} you were shown them. Now:\n{render_approval(approval)}"
        skills = sorted(server.review.skills.held)
        held, instructions, prompts = await self._conclude(server, approve=approve)
        self._audit.record(
            "approved" if approve else "rejected",
            server=name,
            tools=len(held),
            instructions=instructions is not None,
            prompts=len(prompts),
            skills=len(skills),
        )
        text = _decided(name, held, instructions is not None, prompts, approve=approve)
        if skills:
            text += (
                f"{' ' if text else ''}{'Approved' if approve else 'Rejected'} {len(skills)} skill(s) of "
                f"{name}: {', '.join(skills)}. "
                + (
                    "The agent can load them now."
                    if approve
                    else "They stay held until the server changes them again."
                )
            )
        return self._redact(text)

    async def _conclude(
        self, server: RemoteServer, *, approve: bool
    ) -> tuple[list[mcp_types.Tool], str | None, list[mcp_types.Prompt]]:
        """Approve or reject everything of the server that waits; the tools, instructions and prompts decided."""
        held = list(server.review.held.values())
        instructions = server.review.held_instructions
        pins = server.entry.pins or Pins()
        if prompts := list(server.review.prompts.held.values()):
            pinned = pins.prompts or PromptPins()
            pins = replace(pins, prompts=pinned.approve(prompts) if approve else pinned.reject(prompts))
        if server.review.skills.held:
            pins = replace(pins, skills=server.review.skills.pins_decided(pins, approve=approve))
        pins = pins.approve(held) if approve else pins.reject(held)
        if instructions is not None:
            if approve:
                pins = pins.approve_instructions(instructions, self._redact)
            else:
                pins = pins.reject_instructions(instructions)
        connection = server.connection
        if connection is not None:
            # Pins of tools the server dropped go: they would only grow with every change.
            pins = pins.only(tool.name for tool in connection.tools)
        await server.decided(pins)
        server.review.prompts.decided(approve=approve)
        server.review.skills.decided(approve=approve)
        return held, instructions, prompts
