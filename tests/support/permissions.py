"""Permission questions against the SDK's server on loopback: a files server whose ``write`` calls
are recorded, and the owner's front end that holds each question until the test answers it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from playa.core import Answer, Question, Sender, answer_from_text
from playa.mcp_remote import HostSecret, RemoteMcpSettings
from servers.python_servers import serve_mcp
from support.chat import RecordingModel, ScriptedUI, msg
from support.remote import SETTINGS, OwnerChat, owner_chat

ADD_TIMEOUT = 60.0
"""The bound on the add of the healthy files server, on a busy machine."""

SCOPE = "console:policies"
ARGUMENTS = {"path": "notes/today.md", "text": "line one\nline two, with a long tail " + "x" * 300}


@dataclass
class FilesServer:
    """A server with a write tool that records every call that reaches it."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def mcp(self) -> MCPServer:
        server = MCPServer("files")

        @server.tool()
        def write(path: str, text: str) -> str:
            """Write a file."""
            self.calls.append({"path": path, "text": text})
            return f"wrote {len(text)} characters to {path}"

        @server.tool()
        def read(path: str) -> str:
            """Read a file."""
            return f"the text of {path}"

        return server


@dataclass
class Asked:
    """A turn that asked the owner: the question, and what the turn returned once it ended."""

    question: Question = field(init=False)
    result: object = None


@dataclass
class PermissionUI(ScriptedUI):
    """A front end whose permission questions wait until the test answers them (``answer``)."""

    pending: list[tuple[Question, anyio.Event]] = field(default_factory=list)
    answered: dict[int, str] = field(default_factory=dict)
    never: bool = False
    """The owner never answers: only the timeout ends the question."""

    async def question(self, question: Question, *, timeout: float = 300.0) -> Answer:
        self.questions.append(question)
        done = anyio.Event()
        self.pending.append((question, done))
        self._changed_now()
        if self.never:
            await anyio.sleep_forever()
        await done.wait()
        answer = answer_from_text(question, self.answered[len(self.pending) - 1])
        assert isinstance(answer, Answer), answer
        return answer

    async def question_shown(self, count: int) -> Question:
        await self.until(lambda seen: len(seen.questions) >= count)
        return self.questions[count - 1]

    def answer(self, line: str) -> None:
        index = len(self.pending) - 1
        self.answered[index] = line
        self.pending[index][1].set()

    @asynccontextmanager
    async def asking(
        self, turn: Callable[..., Awaitable[object]], *args: object, count: int = 1
    ) -> AsyncIterator[Asked]:
        """``turn(*args)`` run beside the block, which starts once the owner was asked their
        ``count``-th question; the block's end waits for the turn's."""
        asked = Asked()

        async def run() -> None:
            asked.result = await turn(*args)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            asked.question = await self.question_shown(count)
            yield asked


def call(arguments: dict[str, Any] = ARGUMENTS) -> str:
    """The offline model's message for a call of ``files__write``."""
    return f"files__write {json.dumps(arguments)}"


@asynccontextmanager
async def files_chat(
    data_dir: Path,
    host_secret: HostSecret,
    *,
    policy: str = "",
    settings: RemoteMcpSettings = SETTINGS,
    model: RecordingModel | None = None,
) -> AsyncIterator[tuple[OwnerChat, FilesServer]]:
    """The files server added to the owner's chat ``SCOPE`` with ``policy`` (``/mcp_add`` words)."""
    files = FilesServer()
    async with (
        serve_mcp(files.mcp()) as served,
        owner_chat(data_dir, host_secret, SCOPE, model, settings) as chat,
    ):
        with anyio.fail_after(ADD_TIMEOUT):
            added = await chat.command(f"/mcp_add files {served.url} {policy}".strip())
        assert added.startswith("Added files: connected"), added
        yield chat, files


@dataclass
class AskChat:
    """The files server added under ``--policy ask``, and the owner's front end."""

    chat: OwnerChat
    files: FilesServer
    ui: PermissionUI

    @asynccontextmanager
    async def members_call(self, member: Sender) -> AsyncIterator[Asked]:
        """``member``'s turn calling ``files__write``, beside the block, which starts once the owner
        was asked about the call (see ``PermissionUI.asking``)."""
        session = await self.chat.session()
        async with self.ui.asking(self.chat.host.handle, session, msg(call(), member), self.ui) as asked:
            yield asked
