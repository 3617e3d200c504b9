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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Final

import anyio.to_thread
import mcp_types

from ..core import UI, Approval, ChatSession, render_approval
from ..exceptions import StoreError
from ._server import RemoteServer
from .store import (
    AuditLog,
    Pins,
    ServerStore,
    approval_digest,
    change_of,
    field_digests,
    instructions_change,
    same_definitions,
    shown_names,
)
from .transport import Connection

__all__ = ["APPROVAL_LIMIT", "Approvals"]

logger = logging.getLogger(__name__)

APPROVAL_LIMIT: Final = 32_000
"""Characters of one approval's text (``render_approval``) at most: about eight Telegram messages.

What waits from a server is shown whole or not at all; a change too large to read through is
rejected rather than approved on a part (a server could hide its instruction at the end)."""


def _decided(name: str, tools: list[mcp_types.Tool], instructions: bool, *, approve: bool) -> str:
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


class Approvals:
    """The owner's approvals of one chat's servers: what is held back, shown, and decided.

    Handed what it works on: the chat's servers (read only), their file, and the chat's own
    ``bind`` (to bind what a decision allows), ``wait_for_connects`` and ``write_section``.
    """

    def __init__(
        self,
        session: ChatSession,
        servers: Mapping[str, RemoteServer],
        store: ServerStore | None,
        *,
        interval: float,
        clock: Callable[[], float],
        redact: Callable[[str], str],
        bind: Callable[[RemoteServer, Connection], Pins | None],
        wait_for_connects: Callable[[], Awaitable[None]],
        write_section: Callable[[], None],
        audit: AuditLog,
    ) -> None:
        """``interval``: seconds between two messages about one server while the first is undecided."""
        self._session = session
        self._servers = servers
        self._store = store
        self._interval = interval
        self._clock = clock
        self._redact = redact
        self._bind = bind
        self._wait_for_connects = wait_for_connects
        self._write_section = write_section
        self._audit = audit
        self.owner_ui: UI | None = None
        """The front end of the owner's latest command: where tool changes are shown to them."""
        self._untold: list[str] = []
        """What the owner must hear once a front end of theirs is known (``owner_seen``)."""
        self._messaged: dict[str, str] = {}
        """Server name → the digest of the latest approval sent to the owner as a message of its own."""

    # Holding back

    def hold_tools(
        self, state: RemoteServer, offered: dict[str, mcp_types.Tool]
    ) -> tuple[dict[str, mcp_types.Tool], Pins | None]:
        """Of the tools a server offers, the ones the model may get; new and changed ones wait in ``state.held``.

        Also returns the pins to save when the entry had none: the list it adopts as approved.
        """
        digests = {remote: field_digests(tool) for remote, tool in offered.items()}
        pins, adopted = state.entry.pins, None
        if pins is None:
            pins = adopted = Pins(digests)
        verdicts = {remote: pins.verdict(tool, digests[remote]) for remote, tool in offered.items()}
        # A changed definition is not the tool the owner approved: until they decide, the model
        # gets neither the new text nor the old one (the server would run the new tool).
        state.held = {remote: tool for remote, tool in offered.items() if verdicts[remote] == "held"}
        live = {remote: tool for remote, tool in offered.items() if verdicts[remote] == "live"}
        state.approved.update(live)
        return live, adopted

    def hold_instructions(self, state: RemoteServer, text: str | None, adopted: Pins | None) -> Pins | None:
        """Give the model the server's instructions as approved; hold changed ones for the owner.

        Pins from before instructions were pinned adopt these (returned with ``adopted``, to save).
        """
        pins = adopted if adopted is not None else state.entry.pins or Pins()
        if pins.instructions is None:
            pins = adopted = pins.approve_instructions(text, self._redact)
        verdict = pins.instructions_verdict(text)
        state.held_instructions = text if verdict == "held" else None
        # Until the owner decides, the model keeps what they approved (or nothing).
        state.instructions = text if verdict == "live" else pins.instructions_text
        return adopted

    async def settle(self, state: RemoteServer, adopted: Pins | None) -> None:
        """After a bind: save an adopted list, and tell the owner of tools that wait for them."""
        name = state.entry.name
        if adopted is not None:
            tools_too = state.entry.pins is None
            try:
                await self._save_pins(state, adopted)
            except StoreError as exc:
                # Held in memory meanwhile; the next connect adopts and tries to save again.
                logger.warning("could not save the tool pins of %s in %s: %s", name, self._session.scope, exc)
            else:
                if not state.quiet_adopt:
                    await self._tell_adopted(name, adopted, tools_too=tools_too)
        state.quiet_adopt = False
        if state.waiting and self._pending(state) != state.shown:
            await self._announce(state)

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

    async def _save_pins(self, state: RemoteServer, pins: Pins) -> None:
        """Seal new pins into the server's entry (an owner's decision, or an adopted list)."""
        entry = replace(state.entry, pins=pins)
        state.entry = entry
        if self._store is not None and self._servers.get(entry.name) is state:
            await anyio.to_thread.run_sync(self._store.put, entry)

    # Showing

    def approval(self, state: RemoteServer) -> Approval | None:
        """What the owner is shown of the server's held tools and instructions (redacted, cut), or None when none wait."""
        if not state.waiting:
            return None
        name = state.entry.name
        pins = state.entry.pins or Pins()
        redact = self._redact
        changes = tuple(
            change_of(tool, pins.tools.get(remote), state.approved.get(remote), redact)
            for remote, tool in sorted(state.held.items())
        )
        instructions: tuple[str, ...] = ()
        note = f"Meanwhile the agent uses its other tools; /mcp_review {name} shows this again."
        if state.held_instructions is not None:
            instructions = instructions_change(pins.instructions_text, state.held_instructions, redact)
            kept = "the instructions you approved" if pins.instructions_text else "no instructions from it"
            note = f"Meanwhile the agent uses its other tools and gets {kept}; /mcp_review {name} shows this again."
        return Approval(
            source=f"The remote MCP server {name}",
            changes=changes,
            approve=f"/mcp_approve {name}",
            reject=f"/mcp_reject {name}",
            note=note,
            instructions=instructions,
            digest=approval_digest(state.held.values(), state.held_instructions, changes, instructions),
        )

    def _pending(self, state: RemoteServer) -> str | None:
        """The digest of what waits for the owner now, as they would be shown it (None: nothing)."""
        approval = self.approval(state)
        return None if approval is None else approval.digest

    async def _refuse_unshowable(self, state: RemoteServer, approval: Approval) -> str | None:
        """Reject what waits when its approval is too long to show whole; what to tell the owner (None: it fits)."""
        size = len(render_approval(approval))
        if size <= APPROVAL_LIMIT:
            return None
        name = state.entry.name
        tools, instructions = await self._conclude(state, approve=False)
        what = (
            [f"{len(tools)} tool(s) ({shown_names((tool.name for tool in tools), self._redact)})"]
            if tools
            else []
        )
        what += ["its instructions"] if instructions is not None else []
        logger.info("%s: a change of %s too large to show was rejected", self._session.scope, name)
        return (
            f"{name} changed {' and '.join(what)}, but the change is too large to show you in full "
            f"({size:,} characters; an approval shows at most {APPROVAL_LIMIT:,}), so it was rejected "
            "unseen: the agent does not get it, and a changed tool stays hidden until the server "
            f"changes it again. To take the server as it is now, remove it (/mcp_remove {name}) and add "
            "it again: an add takes its tools as they are then."
        )

    async def review(self, state: RemoteServer) -> Approval | str | None:
        """What of the server waits for the owner, now counted as shown; None when nothing does.

        A text instead when it was too large to show: it was rejected, and the text says so.
        """
        approval = self.approval(state)
        if approval is None:
            return None
        if (refused := await self._refuse_unshowable(state, approval)) is not None:
            return refused
        state.shown = approval.digest
        return approval

    async def _announce(self, state: RemoteServer) -> None:
        """Show the owner what of the server waits for them, at most once per interval while undecided.

        What is too large to show is rejected at once instead, and the owner told.
        """
        approval = self.approval(state)
        ui = self.owner_ui
        if approval is None:
            return
        if (refused := await self._refuse_unshowable(state, approval)) is not None:
            await self._tell(refused)
            return
        if ui is None:
            # No front end of the owner's known yet (after a restart): they hear it with their
            # next command, and /mcp_list says so meanwhile.
            logger.info("%s: tool changes of %s wait for the owner", self._session.scope, state.entry.name)
            return
        now = self._clock()
        if state.announced is not None and now - state.announced < self._interval:
            # The owner has an undecided message about this server: a server that changes
            # again and again gets no more of their attention than one message per interval.
            # The newest state waits for the next message, /mcp_review, or the decision.
            logger.debug("%s: a further change of %s waits silently", self._session.scope, state.entry.name)
            return
        state.announced = now
        state.shown = approval.digest
        try:
            await ui.approval(approval)
            self._messaged[state.entry.name] = approval.digest
        except Exception as exc:  # boundary: a front end's failure must not stop the server's tools
            state.announced = None  # not shown: the next change may try again
            logger.warning(
                "could not show the owner the tool changes of %s: %s", state.entry.name, type(exc).__name__
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
        for state in list(self._servers.values()):
            if state.waiting and self._pending(state) != state.shown:
                await self._announce(state)

    # Deciding

    async def decide(self, name: str, *, approve: bool, digest: str | None = None) -> str:
        """The owner's ``/mcp_approve`` or ``/mcp_reject``: of exactly the held tools they were shown.

        ``digest`` names what was shown (an ``Approval``'s); without it, what this chat showed last.
        """
        await (
            self._wait_for_connects()
        )  # a server reconnecting (a restart, a group's upgrade) lists its tools
        state = self._servers.get(name)
        if state is None:
            return f"No remote MCP server is named {name} any more."
        approval = self.approval(state)
        if approval is None:
            return f"No tool changes of {name} wait for a decision."
        if (refused := await self._refuse_unshowable(state, approval)) is not None:
            return refused
        decides = state.shown if digest is None else digest
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
                if self._messaged.get(name) != approval.digest:
                    state.announced = None
                    await self._announce(state)
                return (
                    f"The tools of {name} {what} that message was shown, so nothing was "
                    "decided: the newest message shows them as they are now."
                )
            state.shown = approval.digest
            return f"The tools of {name} {what} you were shown them. Now:\n{render_approval(approval)}"
        held, instructions = await self._conclude(state, approve=approve)
        self._audit.record(
            "approved" if approve else "rejected",
            server=name,
            tools=len(held),
            instructions=instructions is not None,
        )
        return self._redact(_decided(name, held, instructions is not None, approve=approve))

    async def _conclude(
        self, state: RemoteServer, *, approve: bool
    ) -> tuple[list[mcp_types.Tool], str | None]:
        """Approve or reject everything of the server that waits; the tools and instructions decided."""
        held = list(state.held.values())
        instructions = state.held_instructions
        pins = state.entry.pins or Pins()
        pins = pins.approve(held) if approve else pins.reject(held)
        if instructions is not None:
            if approve:
                pins = pins.approve_instructions(instructions, self._redact)
            else:
                pins = pins.reject_instructions(instructions)
        connection = state.connection
        if connection is not None:
            # Pins of tools the server dropped go: they would only grow with every change.
            pins = pins.only(tool.name for tool in connection.tools)
        await self._save_pins(state, pins)
        if connection is not None and not connection.broken:
            self.hold_instructions(state, connection.instructions, self._bind(state, connection))
        else:
            # The next connect binds what the pins now allow.
            state.held, state.held_instructions = {}, None
            state.instructions = pins.instructions_text
        state.shown = state.announced = None
        self._write_section()
        return held, instructions
