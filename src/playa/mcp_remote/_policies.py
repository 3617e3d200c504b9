"""The owner's call policies at work: what applies to a call, asking the owner, and changing them.

``deny``: the tool is never offered to the model (``ChatServers`` binds only the others), and a
call that comes all the same is refused here. ``ask``: the call waits while the owner is asked
(``Question.permission``: the owner alone answers, whoever's turn made the call) with the
server, the tool and its arguments in full, redacted; nothing reaches the server until they
allow it, and unanswered within the ask timeout the call is refused. "Always" sets the tool's
policy to ``allow``. A server's annotations never decide: only the owner's policy does, and
only the owner marks a tool read-only (``mark``), which the flow guard lets data flow into.
"""

from __future__ import annotations

import json
import logging
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import anyio.to_thread

from ..core import ALWAYS, Question
from ..exceptions import StoreError
from ._review import APPROVAL_LIMIT
from ._server import ChatContext, RemoteServer
from .store import Decision, shown_name

__all__ = ["DECLINED", "UNANSWERED", "Permit", "Policies"]

logger = logging.getLogger(__name__)

DECLINED: Final = "the owner declined"
UNANSWERED: Final = "the owner did not answer"
DENIED: Final = "the owner's policy does not allow it"

Outcome = Literal["allowed", "always", "declined", "unanswered", "denied", "unshowable"]


@dataclass(frozen=True, slots=True)
class Permit:
    """Whether a call may go to its server: the policy that applied, what came of it, and why not."""

    policy: Decision
    outcome: Outcome
    refusal: str | None = None
    """What the model learns instead of a result; None: the call goes ahead."""


_ALLOWED: Final = Permit("allow", "allowed")
"""A call under ``allow`` with no flow held: most calls, one answer (a ``Permit`` never changes)."""


def _shown_arguments(arguments: dict[str, Any]) -> str:
    """The arguments as JSON the owner reads: every character the server will get, those that
    would not show (zero-width, bidirectional, tag characters) as their JSON escapes, so that
    nothing can hide or reorder what is asked."""
    text = json.dumps(arguments, ensure_ascii=False, indent=2, default=str)
    if text.isascii():
        return text
    return "".join(
        json.dumps(c)[1:-1] if unicodedata.category(c)[0] in "CZ" and c not in " \n" else c for c in text
    )


class Policies:
    """The call policies of one chat's servers: read from each server's entry, asked of the owner
    through the chat's ``Asker``, and sealed into the entry (``RemoteServer.seal_policy``), which
    binds the server's tools again so that a tool now denied leaves the model's list at once."""

    def __init__(self, context: ChatContext) -> None:
        self._session = context.session
        self._servers = context.servers
        self.default: Decision = context.settings.default_policy
        self._ask_timeout = context.settings.ask_timeout
        self._ask = context.asker.ask
        self._redact = context.secrets.redact_out
        self._audit = context.audit

    def of(self, state: RemoteServer, tool: str) -> Decision:
        """What applies to a call of the server's ``tool`` (its own name for it)."""
        return state.entry.policy.of(tool, self.default)

    def read_only(self, state: RemoteServer, tool: str) -> bool:
        """Whether the owner marked the server's ``tool`` read-only (its ``readOnlyHint`` never counts)."""
        return state.entry.policy.is_read_only(tool)

    async def permit(
        self,
        state: RemoteServer,
        exposed: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        flows: Sequence[str] = (),
    ) -> Permit:
        """Whether this call may go to the server now; under ``ask``, once the owner answered.

        ``flows``: what the flow guard found in the arguments that came from elsewhere (one line
        each, what from where); a call with any waits for the owner as under ``ask``, shown them.
        """
        policy = self.of(state, tool)
        if policy == "allow" and not flows:
            return _ALLOWED
        if policy == "deny":
            return self._recorded(
                state,
                tool,
                Permit(policy, "denied", f"{exposed} was not called: {DENIED}."),
            )
        name = state.entry.name
        shown = self._redact(_shown_arguments(arguments))
        sender = self._session.turn_sender
        # A member names themselves: on one line, their name cannot pass for the question's own lines.
        whose = (
            f" in {shown_name(sender.name, self._redact)}'s turn"
            if sender is not None and not sender.is_owner
            else ""
        )
        text = (
            f"The agent wants to call the tool {shown_name(tool, self._redact)} of the remote MCP server {name}{whose}, "
            f"with these arguments:\n{shown}"
        )
        if flows:
            text += (
                "\n\nThey carry data the agent read in this turn from elsewhere, which a prompt "
                "injection may have asked it to send on:\n" + "\n".join(f"- {line}" for line in flows)
            )
        if len(text) > APPROVAL_LIMIT:
            # What the owner could not read whole, they could not allow: a long argument may hide
            # what the call does at its end.
            why = f"its arguments are too long to show the owner in full ({len(shown):,} characters)"
            return self._recorded(
                state,
                tool,
                Permit(policy, "unshowable", f"{exposed} was not called: {why}."),
            )
        try:
            answer = await self._ask(Question(asker=name, text=text, permission=True), self._ask_timeout)
        except anyio.get_cancelled_exc_class():
            # The turn stopped (/stop) while the owner was asked: no answer came, nothing was called.
            self._recorded(
                state, tool, Permit(policy, "unanswered", f"{exposed} was not called: {UNANSWERED}.")
            )
            raise
        if answer.action == "accept":
            always = answer.values.get(ALWAYS) is True
            if always:
                await self._always(state, tool)
            return self._recorded(state, tool, Permit(policy, "always" if always else "allowed"))
        if answer.action == "decline":
            return self._recorded(
                state,
                tool,
                Permit(policy, "declined", f"{exposed} was not called: {DECLINED}."),
            )
        return self._recorded(
            state,
            tool,
            Permit(policy, "unanswered", f"{exposed} was not called: {UNANSWERED}."),
        )

    def _recorded(self, state: RemoteServer, tool: str, permit: Permit) -> Permit:
        sender = self._session.turn_sender
        self._audit.record(
            "permission",
            sender=sender.id if sender is not None else None,
            server=state.entry.name,
            tool=tool,
            policy=permit.policy,
            outcome=permit.outcome,
        )
        return permit

    async def _always(self, state: RemoteServer, tool: str) -> None:
        """The owner allowed the tool for good: its policy becomes ``allow``; this call goes ahead either way."""
        try:
            await self.set(state.entry.name, tool, "allow")
        except StoreError as exc:
            logger.warning("%s: a tool's policy could not be saved: %s", self._session.scope, exc)

    async def set(self, name: str, tool: str | None, decision: Decision) -> Decision | None:
        """Seal ``decision`` for the server ``name`` (``tool`` None) or one of its tools; what applied
        before (None: there is no such server). Raises ``StoreError`` when it cannot be saved."""
        state = self._servers.get(name)
        if state is None:
            return None
        old = state.entry.policy
        before = old.of(tool, self.default) if tool is not None else old.server or self.default
        await state.seal_policy(old.setting(tool, decision))
        self._audit.record("policy_changed", server=name, tool=tool, policy=decision, before=before)
        return before

    async def mark(self, name: str, tool: str | None, read_only: bool) -> bool | None:
        """Seal the owner's read-only mark for the server ``name`` (``tool`` None) or one of its tools;
        whether it was read-only before (None: there is no such server). Raises ``StoreError`` when
        it cannot be saved."""
        state = self._servers.get(name)
        if state is None:
            return None
        old = state.entry.policy
        before = old.is_read_only(tool) if tool is not None else old.read_only is True
        await state.seal_policy(old.marking(tool, read_only))
        self._audit.record("policy_changed", server=name, tool=tool, read_only=read_only, before=before)
        return before
