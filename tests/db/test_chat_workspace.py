"""A chat's workspace in PostgreSQL: the agent's files follow the chat to whichever process serves it.

Real hosts on a real database: a scripted model's turn writes a file through the tool, and a
second host (its own pool and data dir: a second process) reads it; the quota and the
``.volcanic/`` fence hold; no path form reaches another chat's files; a chat that moves to a new
scope takes its files along, and a move onto a chat that has files of its own moves nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo

from playa.agent import Host
from playa.db import Database, DatabaseStorage, DatabaseUrl, upgrade
from playa.exceptions import WorkspaceError
from support.chat import Script, ScriptedUI, msg
from support.host import new_host

pytestmark = pytest.mark.anyio

SCOPE, OTHER = "telegram:123", "telegram:456"
WAIT = 60.0
PLAN = "# plan\n1. tangerine ☀"


@pytest.fixture
async def storage(database: Database) -> DatabaseStorage:
    await upgrade(database)
    return DatabaseStorage(database)


@pytest.fixture
async def second_storage(database_url: str, storage: DatabaseStorage) -> AsyncIterator[DatabaseStorage]:
    """The same database through a pool of its own, as another process has."""
    async with await Database.open(DatabaseUrl.parse(database_url)) as database:
        yield DatabaseStorage(database)


async def say(host: Host, text: str, scope: str = SCOPE) -> str:
    session = await host.session(scope, owner="owner")
    with anyio.fail_after(WAIT):
        reply = await host.handle(session, msg(text), ScriptedUI())
    assert reply is not None
    return reply.text


async def use(host: Host, tool: str, scope: str = SCOPE, **arguments: str) -> str:
    """The result of ``tool`` as the model got it: the offline model calls the tool its message
    names, and answers with what it got (after a line saying whether the call failed)."""
    reply = await say(host, f"{tool} {json.dumps(arguments)}", scope)
    head, _, result = reply.partition("\n")
    assert head in (f"[offline model] {tool} returned:", f"[offline model] {tool} failed:"), reply
    return result


def files_in(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def write_then_answer(path: str, content: str) -> Script:
    """A model that writes ``content`` to ``path`` with the workspace tool, then says what it got back."""

    def write(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert "write_file" in {tool.name for tool in info.function_tools}
        return ModelResponse(parts=[ToolCallPart("write_file", {"path": path, "content": content})])

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        [returned] = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=[TextPart(f"the tool said: {returned.content}")])

    return Script([write, answer])


async def test_a_file_written_in_a_turn_is_in_the_database_and_a_second_process_reads_it(
    storage: DatabaseStorage, second_storage: DatabaseStorage, tmp_path: Path
) -> None:
    script = write_then_answer("notes/plan.md", PLAN)
    async with new_host(tmp_path / "one", script, storage=storage) as host:
        reply = await say(host, "write the plan down")
    assert reply == f"the tool said: wrote {len(PLAN.encode())} bytes to notes/plan.md"
    assert await storage.workspace.read(SCOPE, "notes/plan.md") == PLAN.encode()
    assert files_in(tmp_path / "one") == []  # nothing of it in the data dir

    async with new_host(tmp_path / "two", storage=second_storage) as other:
        assert await use(other, "list_files") == "notes/"
        assert await use(other, "read_file", path="notes/plan.md") == PLAN
        assert await use(other, "delete_file", path="notes/plan.md") == "deleted notes/plan.md"
    assert await storage.workspace.paths(SCOPE, "") == []


async def test_a_write_past_the_quota_is_refused_with_its_message_and_nothing_is_written(
    storage: DatabaseStorage, tmp_path: Path
) -> None:
    async with new_host(tmp_path, storage=storage, workspace_quota=100) as host:
        assert await use(host, "write_file", path="a.txt", content="a" * 80) == "wrote 80 bytes to a.txt"
        refused = await use(host, "write_file", path="b.txt", content="b" * 30)
        assert refused == (
            "the workspace is full: writing 30 bytes would take it to 110 bytes, over its quota of "
            "100 bytes; delete files first"
        )
        # The quota is the chat's, and the host's other writers meet it too.
        session = await host.session(SCOPE, owner="owner")
        with pytest.raises(WorkspaceError, match="the workspace is full: writing 30 bytes"):
            await session.files.write("received/c.bin", b"c" * 30, new=True)
        assert await use(host, "write_file", path="b.txt", content="b" * 90, scope=OTHER) == (
            "wrote 90 bytes to b.txt"
        )
    assert await storage.workspace.paths(SCOPE, "") == ["a.txt"]
    assert await storage.workspace.read(SCOPE, "a.txt") == b"a" * 80


HOSTILE_PATHS = [
    "../telegram:456/secret.txt",
    "..\\telegram:456\\secret.txt",
    "/secret.txt",
    "\\secret.txt",
    "C:secret.txt",
    "C:\\secret.txt",
    "./../secret.txt",
    "a/../../secret.txt",
    "a/./../../telegram:456/secret.txt",
    "%2e%2e/secret.txt",
    "secret.txt\x00",
    ".volcanic/mcp/servers.json",
    ".VOLCANIC/servers.json",
    "a/.Volcanic/x",
    "",
    ".",
]


async def test_no_path_form_reaches_another_chats_files_or_the_host_folder(
    storage: DatabaseStorage, tmp_path: Path
) -> None:
    await storage.workspace.write(OTHER, "secret.txt", b"theirs", quota=None)
    async with new_host(tmp_path, storage=storage) as host:
        for path in HOSTILE_PATHS:
            read = await use(host, "read_file", path=path)
            assert "theirs" not in read, path
            await use(host, "write_file", path=path, content="mine")
            await use(host, "delete_file", path=path)
            listed = await use(host, "list_files", path=path)
            assert "secret.txt" not in listed.splitlines(), (path, listed)
        fenced = await use(host, "write_file", path=".volcanic/x", content="x")
        assert fenced == ".volcanic/ holds the host's own files; the workspace tools cannot use it"
    assert await storage.workspace.read(OTHER, "secret.txt") == b"theirs"
    assert await storage.workspace.paths(OTHER, "") == ["secret.txt"]
    # What the chat wrote (and deleted) was its own: a folder named "%2e%2e".
    assert await storage.workspace.paths(SCOPE, "") == []


async def test_a_file_cannot_stand_where_a_folder_is_nor_a_folder_where_a_file_is(
    storage: DatabaseStorage, tmp_path: Path
) -> None:
    async with new_host(tmp_path, storage=storage) as host:
        await use(host, "write_file", path="notes/a.md", content="x")
        await use(host, "write_file", path="top", content="x")
        assert await use(host, "write_file", path="notes", content="y") == "'notes' is a folder"
        under = await use(host, "write_file", path="top/b.md", content="y")
        assert under == "'top' is a file, not a folder"
        session = await host.session(SCOPE, owner="owner")
        with pytest.raises(WorkspaceError, match="'top' is a file, not a folder"):
            await session.files.write("top/c.bin", b"y")
    assert await storage.workspace.paths(SCOPE, "") == ["notes/a.md", "top"]


async def test_a_moved_chat_takes_its_files_and_a_chat_with_files_of_its_own_is_not_moved_onto(
    storage: DatabaseStorage, tmp_path: Path
) -> None:
    old, new, taken = "telegram:-5", "telegram:-1005", "telegram:-1006"
    async with new_host(tmp_path, storage=storage) as host:
        await use(host, "write_file", path="notes/plan.md", content=PLAN, scope=old)
        await use(host, "write_file", path="mine.txt", content="kept", scope=taken)
        await say(host, "remember this", scope=old)
        assert await host.move_scope(old, taken, owner="owner") == "occupied"
        assert await storage.workspace.paths(old, "") == ["notes/plan.md"]
        assert await storage.workspace.paths(taken, "") == ["mine.txt"]

        assert await host.move_scope(old, new, owner="owner") == "moved"
        # Done again (a restart before the update was marked handled): nothing to move, no refusal.
        assert await host.move_scope(old, new, owner="owner") == "nothing"
        assert await use(host, "read_file", path="notes/plan.md", scope=new) == PLAN
        assert await use(host, "list_files", scope=old) == "(empty)"
    assert await storage.workspace.paths(new, "") == ["notes/plan.md"]
    assert await storage.workspace.paths(old, "") == []
    async with storage.database.connection() as connection:
        usage = {
            row["chat"]: row["bytes"]
            for row in await connection.fetch("SELECT chat, bytes FROM workspace_usage WHERE bytes > 0")
        }
    assert usage == {new: len(PLAN.encode()), taken: 4}  # the quota's count moved with the files
