"""Questions in the console: the real ``playa chat``, in a pseudo-terminal and in a pipe.

A server's question (elicitation) comes from the SDK's own server on loopback, on the
``initialize`` handshake, during a tool call the offline model makes; the secret question
comes from ``/mcp_add … --bearer``. While either waits, the lines typed go to it, ``/help``
and the commands that only show something answer at once, and any other command cancels it
with a note and then runs.
"""

from __future__ import annotations

import json
import os
import pty
import re
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal, cast

import anyio
import mcp_types as types
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.message import ServerMessageMetadata

from playa.core import NOTHING_TO_ANSWER, cancelled_for
from servers.greeting import greeting_server
from servers.python_servers import RunningServer, recording_http_server, serve_mcp

pytestmark = pytest.mark.anyio

WAIT = 60.0
"""Seconds to wait for the chat's output: the process starts, connects and answers on a busy machine."""
TOKEN = "console-question-token-8d2f6a0c4e1b"
QUESTION = "asking asks: What is your name?"
Mode = Literal["pty", "pipe"]
_NOISE = re.compile(r"\r|\x1b\[K|[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] [^\n]*?(?=\x1b|\n|$)")
"""What a terminal shows besides the text: carriage returns, line clears, the status line."""


def asking_server() -> MCPServer:
    server = greeting_server()

    @server.tool()
    async def sign_in(ctx: Context, url: str) -> str:
        """Ask the person to open a link."""
        context = ctx.request_context
        params = types.ElicitRequestURLParams(message="Sign in to go on", url=url, elicitation_id="e1")
        result = await context.session.send_request(
            types.ElicitRequest(params=params),
            types.ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=context.request_id),
        )
        return f"link: {result.action}"

    return server


@pytest.fixture(params=["pty", "pipe"])
def mode(request: pytest.FixtureRequest) -> Mode:
    """A test that takes it runs in a pseudo-terminal and in a pipe."""
    return cast(Mode, request.param)


@asynccontextmanager
async def asking(*, bearer: str | None = None) -> AsyncIterator[RunningServer]:
    async with serve_mcp(asking_server(), protocols="handshake", bearer=bearer) as served:
        yield served


class Chat:
    """A ``playa chat`` process, its input a pseudo-terminal or a pipe: lines in, output waited on by content."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.raw = ""
        self._grew = anyio.Event()
        self._write: int | None = None

    @property
    def out(self) -> str:
        """What the chat wrote, as a person reads it (a terminal's line clears and status line left out)."""
        return _NOISE.sub("", self.raw)

    def say(self, line: str) -> None:
        assert self._write is not None
        os.write(self._write, (line + "\n").encode())

    def end_input(self) -> None:
        """Ctrl-D in a terminal; the pipe's end in a pipe."""
        assert self._write is not None
        if self.mode == "pty":
            os.write(self._write, b"\x04")
        else:
            os.close(self._write)
            self._write = None

    async def wait_for(self, text: str, *, after: int = 0) -> int:
        """Where ``text`` first shows at or after ``after``, once it does."""
        with anyio.move_on_after(WAIT):
            while (at := self.out.find(text, after)) < 0:
                await self._grew.wait()
            return at
        pytest.fail(f"{text!r} never showed; the chat wrote:\n{self.out[after:][-3000:]}")

    def mark(self) -> int:
        return len(self.out)

    async def _read(self, fd: int) -> None:
        while True:
            try:
                chunk = await anyio.to_thread.run_sync(os.read, fd, 65536, abandon_on_cancel=True)
            except OSError:  # a pseudo-terminal whose other side closed
                return
            if not chunk:
                return
            self.raw += chunk.decode(errors="replace")
            self._grew.set()
            self._grew = anyio.Event()

    @asynccontextmanager
    async def running(
        self, data_dir: Path, stderr: Path, extra: Mapping[str, str] | None = None
    ) -> AsyncIterator[Chat]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYA_", "MCP_"))}
        env |= {
            "PLAYA_LOG_LEVEL": "WARNING",
            "PLAYA_CONNECT_TIMEOUT": "30",
            "COLUMNS": "200",
            **(extra or {}),
        }
        command = [sys.executable, "-m", "playa", "chat", "--data-dir", str(data_dir)]
        if self.mode == "pty":
            parent, child = pty.openpty()
            stdin = stdout = child
            read, self._write = parent, parent
        else:
            stdin, self._write = os.pipe()
            read, stdout = os.pipe()
        with stderr.open("wb") as errors:
            process = await anyio.open_process(command, stdin=stdin, stdout=stdout, stderr=errors, env=env)
        for fd in {stdin, stdout}:
            os.close(fd)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read, read)
                yield self
                if self._write is not None:
                    self.end_input()
                with anyio.fail_after(WAIT):
                    code = await process.wait()
                assert code == 0, await anyio.Path(stderr).read_text()
                tg.cancel_scope.cancel()
        finally:
            if process.returncode is None:
                process.kill()
                with anyio.CancelScope(shield=True), anyio.fail_after(WAIT):
                    await process.wait()
            for fd in {read, self._write} - {None}:
                assert fd is not None
                os.close(fd)


@asynccontextmanager
async def chat_with(tmp_path: Path, mode: Mode) -> AsyncIterator[tuple[Chat, RunningServer]]:
    """``playa chat`` with the asking server added, in ``mode``."""
    async with asking() as served, Chat(mode).running(tmp_path / "data", tmp_path / "stderr.log") as chat:
        chat.say(f"/mcp_add asking {served.url}")
        await chat.wait_for("Added asking: connected")
        yield chat, served


@asynccontextmanager
async def greet_asked(tmp_path: Path, mode: Mode) -> AsyncIterator[tuple[Chat, RunningServer, int]]:
    """``playa chat`` in ``mode`` with the asking server added, whose ``greet`` the agent calls: the
    chat, the server, and where its question shows."""
    async with chat_with(tmp_path, mode) as (chat, served):
        mark = chat.mark()
        chat.say("asking__greet {}")
        yield chat, served, await chat.wait_for(QUESTION, after=mark)


@asynccontextmanager
async def bearer_asked(tmp_path: Path, mode: Mode) -> AsyncIterator[tuple[Chat, int]]:
    """``playa chat`` in ``mode`` asks the bearer token for the asking server it is adding: the
    chat, and where the question shows."""
    async with (
        asking(bearer=TOKEN) as served,
        Chat(mode).running(tmp_path / "data", tmp_path / "err") as chat,
    ):
        chat.say(f"/mcp_add asking {served.url} --bearer")
        yield chat, await chat.wait_for("Send the bearer token for asking.")


async def test_the_answer_typed_once_reaches_the_server_and_help_and_list_answer_while_it_waits(
    tmp_path: Path, mode: Mode
) -> None:
    async with greet_asked(tmp_path, mode) as (chat, served, at):
        chat.say("/help")
        helped = await chat.wait_for("Commands:\n/help — list the commands", after=at)
        chat.say("/mcp_list")
        listed = await chat.wait_for(f"  url: {served.url}", after=helped)
        chat.say("/accept name=Ann")
        greeted = await chat.wait_for("[offline model] asking__greet returned:\nhello Ann", after=listed)
        # With nothing to answer, /accept says so, and is no unknown command.
        chat.say("/accept name=Bob")
        await chat.wait_for(NOTHING_TO_ANSWER, after=greeted)
    assert "Unknown command" not in chat.out
    assert "hello Bob" not in chat.out
    assert chat.out.count(QUESTION) == 1


async def test_another_command_cancels_the_question_with_a_note_and_then_runs(
    tmp_path: Path, mode: Mode
) -> None:
    async with greet_asked(tmp_path, mode) as (chat, _, at):
        chat.say("/reset")
        noted = await chat.wait_for(cancelled_for("reset"), after=at)
        result = await chat.wait_for("asking__greet returned:\nno name: cancel", after=noted)
        await chat.wait_for("This chat's conversation is forgotten.", after=result)


async def test_a_script_in_a_pipe_answers_the_question_with_the_line_after_the_message(
    tmp_path: Path,
) -> None:
    # Written ahead, before the question shows: the line after the message is its answer, and
    # what follows the answer is the next messages, in order: the /reset cancels no question.
    async with chat_with(tmp_path, "pipe") as (chat, _):
        mark = chat.mark()
        chat.say("asking__greet {}\n/mcp_list\n/accept name=Ann\n/reset\nasking__greet {}\n/decline")
        greeted = await chat.wait_for("returned:\nhello Ann", after=mark)
        reset = await chat.wait_for("This chat's conversation is forgotten.", after=greeted)
        await chat.wait_for("returned:\nno name: decline", after=reset)
    assert chat.out.index("asking: connected", mark) < greeted
    assert "cancelled" not in chat.out


async def test_the_secret_question_takes_the_key_unshown_while_help_and_list_answer_at_once(
    tmp_path: Path, mode: Mode
) -> None:
    async with bearer_asked(tmp_path, mode) as (chat, at):
        chat.say("/help")
        helped = await chat.wait_for("Commands:", after=at)
        chat.say("/mcp_list")
        listed = await chat.wait_for("No remote MCP servers.", after=helped)
        chat.say(TOKEN)
        await chat.wait_for("Added asking: connected", after=listed)
    # In a terminal the key is never shown, not even as it is typed; the history never holds it.
    assert TOKEN not in chat.raw
    assert not [p for p in (tmp_path / "data").rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]


async def test_a_command_cancels_the_secret_question_and_then_runs(tmp_path: Path, mode: Mode) -> None:
    async with bearer_asked(tmp_path, mode) as (chat, at):
        chat.say("/mcp_remove asking")
        noted = await chat.wait_for(cancelled_for("mcp_remove"), after=at)
        unsaved = await chat.wait_for("No answer came, so nothing was saved.", after=noted)
        removed = await chat.wait_for("There is no server named 'asking'", after=unsaved)
        # A plain message after the question is a message again: the agent answers it.
        chat.say("hello there")
        await chat.wait_for("[offline model]", after=removed)


async def test_in_a_pipe_the_secret_question_takes_one_line_and_what_follows_keeps_its_order(
    tmp_path: Path,
) -> None:
    # Written ahead: a sentence is no token; the key after it is a message of its own, refused;
    # the command after that is no cancel of a question that is over.
    async with (
        asking(bearer=TOKEN) as served,
        Chat("pipe").running(tmp_path / "data", tmp_path / "err") as chat,
    ):
        chat.say(f"/mcp_add asking {served.url} --bearer\nsorry, which one\n{TOKEN}\n/mcp_list")
        refused = await chat.wait_for("That is not a token (it has spaces), so nothing was saved.")
        key = await chat.wait_for("looks like a key, so it was not sent to the agent", after=refused)
        await chat.wait_for("No remote MCP servers.", after=key)
    assert "cancelled" not in chat.out


_LOOKALIKE = "Domain: p\u0430ypal.example (written xn--pypal-4ve.example)"
_MIXED = "Warning: 'p\u0430ypal' mixes scripts (Cyrillic, Latin): it may imitate another name."


async def test_a_link_question_shows_the_whole_link_its_domain_and_the_warning_and_nothing_opens_it(
    tmp_path: Path, mode: Mode
) -> None:
    # The first two domains do not resolve, and the loopback page records every request: none
    # is made, whatever the person answers.
    async with recording_http_server(path="/consent") as page, chat_with(tmp_path, mode) as (chat, _):
        asked = [
            ("http://xn--pypal-4ve.example/login?next=%2Fhome", _LOOKALIKE, _MIXED, "decline"),
            ("https://p\u0430ypal.example/", _LOOKALIKE, _MIXED, "cancel"),
            (f"{page.url}?state=abc", "Domain: 127.0.0.1", None, "accept"),
        ]
        for url, domain, warning, action in asked:
            mark = chat.mark()
            chat.say(f"asking__sign_in {json.dumps({'url': url})}")
            at = await chat.wait_for("asking asks: Sign in to go on\n", after=mark)
            await chat.wait_for("Answer /accept if you will open it, /decline, or /cancel.", after=at)
            shown = chat.out[at:].splitlines()
            assert shown[1:3] == [
                "It asks you to open this link (nothing was fetched from it):",
                f"Link: {url}",
            ]
            assert shown[3].replace("\x1b[1m", "").replace("\x1b[0m", "") == domain
            # Bold in a terminal, plain in a pipe.
            assert (shown[3] == f"\x1b[1m{domain}\x1b[0m") == (mode == "pty")
            assert shown[4] == (warning or "Answer /accept if you will open it, /decline, or /cancel.")
            chat.say(f"/{action}")
            await chat.wait_for(f"asking__sign_in returned:\nlink: {action}", after=at)
    assert page.requests == []
