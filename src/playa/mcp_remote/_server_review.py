"""What of one server waits for its owner's decision: held tools and instructions, and what was shown of them.

A ``ServerReview`` belongs to one ``RemoteServer`` and is the only writer of its fields: the
binding asks it which tools go live (``hold_tools``), the chat's ``Review`` asks it what to show
and records what was shown; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import mcp_types

from ..core import Approval, Redactor
from ._prompt_review import PromptHold
from ._skill_review import SkillHold
from .store import Pins, ServerEntry, approval_digest, change_of, field_digests, instructions_change

__all__ = ["ServerReview"]


@dataclass(eq=False)
class ServerReview:
    """The owner's review of one server: what is held back, what was approved, and what was shown."""

    held: dict[str, mcp_types.Tool] = field(default_factory=dict)
    """New or changed tools held back from the model until the owner decides, by the server's names."""
    approved: dict[str, mcp_types.Tool] = field(default_factory=dict)
    """The approved definitions as last seen live: what a change is shown against."""
    shown: str | None = None
    """The digest of the held tools as the owner was last shown them: only those can be approved."""
    announced: float | None = None
    """When the owner was last sent a message about what waits (the clock's time), while it is
    undecided: the next one waits for the approval interval."""
    messaged: str | None = None
    """The digest of the latest approval sent to the owner as a message of its own."""
    instructions: str | None = None
    """The server's ``instructions`` the model gets (its own words: untrusted): those of the last
    connection when the owner approved them, else the approved ones (or none)."""
    held_instructions: str | None = None
    """The server's new instructions, held back from the model until the owner decides."""
    prompts: PromptHold = field(default_factory=PromptHold)
    """The server's prompts: which can run, and which wait with its tools for the owner's decision."""
    skills: SkillHold = field(default_factory=SkillHold)
    """The server's skills: which the agent is offered, and which wait with its tools for the owner."""
    quiet: bool = False
    """Adopting the tool list needs no word to the owner (an ``/mcp_add``, whose reply lists it)."""
    _prompt: tuple[str | None, Redactor, str] | None = field(default=None, init=False, repr=False)
    """The instructions as the prompt shows them, with what they were made from."""

    @property
    def waiting(self) -> bool:
        """Whether changed tools, instructions or prompts wait for the owner's decision."""
        held = bool(self.held) or bool(self.prompts.held) or bool(self.skills.held)
        return held or self.held_instructions is not None

    # Holding back

    def hold_tools(
        self, entry: ServerEntry, offered: dict[str, mcp_types.Tool]
    ) -> tuple[dict[str, mcp_types.Tool], Pins | None]:
        """Of the tools a server offers, the ones the model may get; new and changed ones are held.

        Also returns the pins to save when the entry had none: the list it adopts as approved.
        """
        digests = {remote: field_digests(tool) for remote, tool in offered.items()}
        pins, adopted = entry.pins, None
        if pins is None:
            pins = adopted = Pins(digests)
        verdicts = {remote: pins.verdict(tool, digests[remote]) for remote, tool in offered.items()}
        # A changed definition is not the tool the owner approved: until they decide, the model
        # gets neither the new text nor the old one (the server would run the new tool).
        self.held = {remote: tool for remote, tool in offered.items() if verdicts[remote] == "held"}
        live = {remote: tool for remote, tool in offered.items() if verdicts[remote] == "live"}
        self.approved.update(live)
        return live, adopted

    def hold_instructions(
        self, entry: ServerEntry, text: str | None, adopted: Pins | None, redact: Callable[[str], str]
    ) -> Pins | None:
        """Give the model the server's instructions as approved; hold changed ones for the owner.

        Pins from before instructions were pinned adopt these (returned with ``adopted``, to save).
        """
        pins = adopted if adopted is not None else entry.pins or Pins()
        if pins.instructions is None:
            pins = adopted = pins.approve_instructions(text, redact)
        verdict = pins.instructions_verdict(text)
        self.held_instructions = text if verdict == "held" else None
        # Until the owner decides, the model keeps what they approved (or nothing).
        self.instructions = text if verdict == "live" else pins.instructions_text
        return adopted

    def concluded(self, pins: Pins, *, rebound: bool) -> None:
        """The owner decided: nothing of what was shown waits any more.

        ``rebound``: a live connection was bound again (and held what still waits); otherwise the
        next connect binds what ``pins`` now allow.
        """
        if not rebound:
            self.held, self.held_instructions = {}, None
            self.instructions = pins.instructions_text
        self.shown = self.announced = None

    def adopt_quietly(self) -> None:
        """The next adoption of the tool list needs no word to the owner (an ``/mcp_add`` lists them)."""
        self.quiet = True

    def take_quiet(self) -> bool:
        """Whether this adoption needs no word to the owner; the next one does."""
        quiet, self.quiet = self.quiet, False
        return quiet

    # Showing

    def approval(self, entry: ServerEntry, redact: Callable[[str], str]) -> Approval | None:
        """What the owner is shown of the held tools and instructions (redacted, cut), or None when none wait."""
        if not self.waiting:
            return None
        name = entry.name
        pins = entry.pins or Pins()
        changes = (
            tuple(
                change_of(tool, pins.tools.get(remote), self.approved.get(remote), redact)
                for remote, tool in sorted(self.held.items())
            )
            + self.prompts.changes(pins, redact)
            + self.skills.changes(pins, redact)
        )
        instructions: tuple[str, ...] = ()
        note = f"Meanwhile the agent uses its other tools; /mcp_review {name} shows this again."
        if self.held_instructions is not None:
            instructions = instructions_change(pins.instructions_text, self.held_instructions, redact)
            kept = "the instructions you approved" if pins.instructions_text else "no instructions from it"
            note = f"Meanwhile the agent uses its other tools and gets {kept}; /mcp_review {name} shows this again."
        return Approval(
            source=f"The remote MCP server {name}",
            changes=changes,
            approve=f"/mcp_approve {name}",
            reject=f"/mcp_reject {name}",
            note=note,
            instructions=instructions,
            digest=approval_digest(
                self.held.values(),
                self.held_instructions,
                changes,
                instructions,
                self.prompts.held.values(),
                [(path, skill.digest) for path, skill in self.skills.held.items()],
            ),
        )

    def saw(self, digest: str) -> None:
        """The owner was shown what waits as ``digest`` names it: only that can be approved."""
        self.shown = digest

    def announce(self, digest: str, now: float, interval: float) -> bool:
        """Whether the owner may be sent a message about what waits now (counted as shown if so).

        A server that changes again and again gets no more of their attention than one message
        per ``interval`` while the first is undecided.
        """
        if self.announced is not None and now - self.announced < interval:
            return False
        self.announced = now
        self.shown = digest
        return True

    def announced_as(self, digest: str | None) -> None:
        """The message went out (``digest``), or could not (None: the next change may try again)."""
        if digest is None:
            self.announced = None
        else:
            self.messaged = digest

    def reopen(self) -> None:
        """The next message about what waits goes out at once (the owner asked)."""
        self.announced = None

    def prompt_instructions(self, redactor: Redactor, render: Callable[[str, Redactor], str]) -> str:
        """The instructions as the prompt shows them (``render``), made once per text and redactor."""
        made = self._prompt
        if made is not None and made[0] is self.instructions and made[1] is redactor:
            return made[2]
        text = render(self.instructions or "", redactor)
        self._prompt = (self.instructions, redactor, text)
        return text
