"""A scripted front end and scripted or recording models: our own seams, for host tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from playa.agent import offline_model
from playa.core import (
    Answer,
    Approval,
    IncomingMessage,
    MessageRef,
    Panel,
    Question,
    Sender,
    answer_from_text,
)

OWNER = Sender(id="owner", name="Owner", is_owner=True)
GUEST = Sender(id="guest", name="Guest", is_owner=False)


@dataclass
class ScriptedUI:
    """A front end that records what it was asked to do and answers questions from a list."""

    answers: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    private: list[str] = field(default_factory=list)
    asked: list[tuple[str, bool]] = field(default_factory=list)
    deleted: list[MessageRef] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    can_delete: bool = True
    replies: list[str] = field(default_factory=list)
    """Answer lines to the servers' questions (``/accept a=1``), in order; none left: cancel."""
    questions: list[Question] = field(default_factory=list)
    approvals: list[Approval] = field(default_factory=list)
    panels: list[Panel] = field(default_factory=list)
    progress_shown: list[tuple[str, str]] = field(default_factory=list)
    """Each ``progress(key, text)``, in order."""
    private_place: str = "above"
    """Where ``send_private`` shows text: this front end is the owner's own, like the console."""
    _changed: anyio.Event | None = None

    async def send(self, text: str) -> MessageRef | None:
        self.sent.append(text)
        self._changed_now()
        return len(self.sent)

    async def until(self, seen: Callable[[ScriptedUI], bool]) -> None:
        """Wait until ``seen`` holds of what the front end was given (bound it with ``fail_after``)."""
        while not seen(self):
            changed = self._changed = anyio.Event()
            await changed.wait()

    async def send_private(self, text: str) -> MessageRef | None:
        self.private.append(text)
        self._changed_now()
        return len(self.private)

    async def ask(self, question: str, *, secret: bool = False, timeout: float = 300.0) -> str | None:
        self.asked.append((question, secret))
        return self.answers.pop(0) if self.answers else None

    async def question(self, question: Question, *, timeout: float = 300.0) -> Answer:
        self.questions.append(question)
        while self.replies:
            answer = answer_from_text(question, self.replies.pop(0))
            if isinstance(answer, Answer):
                return answer
            self.sent.append(answer)
        return Answer("cancel")

    async def approval(self, approval: Approval) -> MessageRef | None:
        self.approvals.append(approval)
        self._changed_now()
        return len(self.approvals)

    async def approval_shown(self, count: int) -> Approval:
        """The ``count``-th approval, once it was shown (bound it with ``fail_after``)."""
        await self.until(lambda seen: len(seen.approvals) >= count)
        return self.approvals[count - 1]

    async def panel(self, panel: Panel) -> MessageRef | None:
        self.panels.append(panel)
        self._changed_now()
        return len(self.panels)

    async def delete(self, ref: MessageRef) -> bool:
        self.deleted.append(ref)
        return self.can_delete

    async def notify(self, text: str) -> None:
        self.notices.append(text)

    async def progress(self, key: str, text: str) -> None:
        self.progress_shown.append((key, text))
        self._changed_now()

    def _changed_now(self) -> None:
        if self._changed is not None:
            self._changed.set()


@dataclass
class Script:
    """A scripted model: each step's function gets the messages and what the agent offers."""

    steps: list[Callable[[list[ModelMessage], AgentInfo], ModelResponse]]
    seen: list[tuple[list[ModelMessage], AgentInfo]] = field(default_factory=list)

    def model(self) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.seen.append((list(messages), info))
            return self.steps.pop(0)(messages, info)

        return FunctionModel(respond)


def msg(text: str, sender: Sender = OWNER, ref: Any = None) -> IncomingMessage:
    return IncomingMessage(text=text, sender=sender, ref=ref)


class RecordingModel:
    """The offline model, recording the messages and the tools it was given at every step."""

    def __init__(self) -> None:
        self.seen: list[tuple[list[ModelMessage], AgentInfo]] = []
        respond = offline_model().function
        assert respond is not None
        self._respond = respond

    def model(self) -> FunctionModel:
        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.seen.append((list(messages), info))
            result = self._respond(messages, info)
            assert isinstance(result, ModelResponse)
            return result

        return FunctionModel(respond)

    def tools(self, step: int = -1) -> set[str]:
        return {tool.name for tool in self.seen[step][1].function_tools}

    def instructions(self, step: int = -1) -> str:
        return self.seen[step][1].instructions or ""
