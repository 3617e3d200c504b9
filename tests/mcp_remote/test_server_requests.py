"""A server's own requests (roots, sampling, questions, ping), inside and outside a call: none hangs.

The server is the SDK's own, over both transports, speaking the handshake protocol, where a
request outside a call comes on the session's listening stream (Streamable HTTP) or on the one
event stream (SSE). Each tool call sends one request and reports what came back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from anyio.abc import TaskGroup
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from starlette.types import ASGIApp, Receive, Scope, Send

from playa.core import Answer, Question, answer_from_text, check_link
from playa.mcp_remote import (
    MAX_LINK_SHOWN,
    ConnectionSettings,
    Connector,
    Endpoint,
    HostSecret,
    RemoteMcpSettings,
    asking,
)
from servers.python_servers import OneProtocol, RunningServer, serve_asgi, serve_mcp
from support.chat import RecordingModel, ScriptedUI, msg
from support.host import remote_host

pytestmark = pytest.mark.anyio

HEALTHY = ConnectionSettings(connect_timeout=15.0, call_timeout=30.0, close_timeout=5.0)
ANSWERED_WITHIN = 5.0
"""A refused or answered request must not cost a call more than this. An unanswered one costs the
call its whole timeout (30 s) or the server's own; on an idle machine the call takes well under a
second, and the margin is for a busy one."""

FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Your name", "default": "Ada"},
        "age": {"type": "integer"},
        "colour": {"type": "string", "enum": ["red", "green"], "default": "green"},
        "subscribe": {"type": "boolean", "default": False},
    },
    "required": ["age"],
}


def _request(
    kind: str, schema: dict[str, Any], url: str | None = None
) -> tuple[types.ServerRequest, type[types.Result]]:
    if url is not None:
        link = types.ElicitRequestURLParams(message="Sign in", url=url, elicitation_id="e1")
        return types.ElicitRequest(params=link), types.ElicitResult
    if kind == "roots":
        return types.ListRootsRequest(), types.ListRootsResult
    if kind == "sampling":
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))
        params = types.CreateMessageRequestParams(messages=[message], max_tokens=5)
        return types.CreateMessageRequest(params=params), types.CreateMessageResult
    if kind == "ping":
        return types.PingRequest(), types.EmptyResult
    form = types.ElicitRequestFormParams(message="Tell me about you", requested_schema=schema)
    return types.ElicitRequest(params=form), types.ElicitResult


def asking_server() -> MCPServer:
    server = MCPServer("asking")

    @server.tool()
    async def send(
        kind: str, where: str, ctx: Context, schema: dict[str, Any] | None = None, url: str | None = None
    ) -> str:
        """Send the client one request of ``kind`` (a URL question with ``url``), on this call's stream or outside it."""
        context = ctx.request_context
        related = context.request_id if where == "inside" else None
        request, result_type = _request(kind, schema or FORM, url)
        try:
            result = await context.session.send_request(
                request, result_type, metadata=ServerMessageMetadata(related_request_id=related)
            )
        except MCPError as exc:
            return f"refused: {exc.error.message}"
        return "answered: " + result.model_dump_json(by_alias=True, exclude_none=True)

    return server


class Person:
    """Answers questions with lines, as a person at the console would; records what was shown."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)
        self.asked: list[Question] = []

    async def __call__(self, question: Question) -> Answer:
        self.asked.append(question)
        while self.lines:
            answer = answer_from_text(question, self.lines.pop(0))
            if isinstance(answer, Answer):
                return answer
        return Answer("cancel")


def texts(result: types.CallToolResult) -> list[str]:
    """The text blocks of a tool's result."""
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def _call(
    task_group: TaskGroup,
    transport: Literal["streamable-http", "sse"],
    arguments: dict[str, Any],
    person: Person | None = None,
) -> tuple[str, float]:
    """One call of the asking server's tool; returns its text and how long the call took."""
    async with serve_mcp(asking_server(), transport, protocols="handshake") as served:
        endpoint = Endpoint(server="asking", url=served.url, transport=transport)
        connection = await Connector(HEALTHY).connect(
            endpoint, task_group, elicit=asking(endpoint, person) if person is not None else None
        )
        try:
            started = anyio.current_time()
            result = await connection.call_tool("send", arguments)
            took = anyio.current_time() - started
        finally:
            await connection.aclose()
    return "".join(texts(result)), took


TRANSPORTS = ["streamable-http", "sse"]
WHERE = ["inside", "outside"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("roots", "refused: List roots not supported"),
        ("sampling", "refused: Sampling not supported"),
        ("ping", "answered: {}"),
        ("elicitation", 'answered: {"action":"cancel"}'),
    ],
)
async def test_every_server_request_is_answered_at_once_inside_or_outside_a_call(
    task_group: TaskGroup, transport: Literal["streamable-http", "sse"], where: str, kind: str, expected: str
) -> None:
    # Sampling and roots are declined; a question nobody is there to answer is cancelled.
    with anyio.fail_after(30):
        text, took = await _call(
            task_group,
            transport,
            {"kind": kind, "where": where},
            person=Person() if kind == "elicitation" else None,
        )
    assert text == expected
    assert took < ANSWERED_WITHIN, f"the call took {took:.2f} s"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("where", WHERE)
async def test_a_question_goes_to_the_person_and_their_answer_to_the_server(
    task_group: TaskGroup, transport: Literal["streamable-http", "sse"], where: str
) -> None:
    person = Person("/accept colour=blue", "/accept age=36 subscribe=yes")
    with anyio.fail_after(30):
        text, _ = await _call(task_group, transport, {"kind": "elicitation", "where": where}, person)
    # The first answer is refused (no such colour) and asked again; defaults fill the rest.
    assert (
        text
        == 'answered: {"action":"accept","content":{"name":"Ada","age":36,"colour":"green","subscribe":true}}'
    )
    (question,) = person.asked
    assert question.asker == "asking"
    assert question.text == "Tell me about you"
    assert [(f.name, f.kind, f.required, f.default) for f in question.fields] == [
        ("name", "string", False, "Ada"),
        ("age", "integer", True, None),
        ("colour", "choice", False, "green"),
        ("subscribe", "boolean", False, False),
    ]


@pytest.mark.parametrize("answer", ["/decline", "/cancel"])
async def test_declined_and_cancelled_questions_send_no_values(task_group: TaskGroup, answer: str) -> None:
    with anyio.fail_after(30):
        text, _ = await _call(
            task_group, "streamable-http", {"kind": "elicitation", "where": "inside"}, Person(answer)
        )
    assert text == f'answered: {{"action":"{answer[1:]}"}}'


@pytest.mark.parametrize(
    "field",
    [
        {"password": {"type": "string"}},
        {"apiKey": {"type": "string"}},
        {"github_token": {"type": "string"}},
        {"x": {"type": "string", "description": "Your secret"}},
        {"x": {"type": "string", "format": "password"}},
    ],
)
async def test_a_form_that_asks_for_a_secret_is_refused_without_asking(
    task_group: TaskGroup, field: dict[str, Any]
) -> None:
    person = Person("/accept")
    schema = {"type": "object", "properties": field}
    with anyio.fail_after(30):
        text, took = await _call(
            task_group,
            "streamable-http",
            {"kind": "elicitation", "where": "inside", "schema": schema},
            person,
        )
    assert person.asked == []
    assert text.startswith("refused: refused: the form asks for a secret")
    assert "URL mode" in text
    assert took < ANSWERED_WITHIN


async def test_a_link_too_long_to_show_whole_is_refused_without_asking(task_group: TaskGroup) -> None:
    # Shown, a link takes a line and its domain another; an invisible character shows %-encoded.
    base = "https://login.example.org/?"
    longest = base + "a" * (MAX_LINK_SHOWN - len("\n".join(check_link(base).lines())))
    invisible = base + "\u200b" * 300
    person = Person("/accept")
    answers: list[str] = []
    with anyio.fail_after(60):
        for url in (longest, longest + "a", invisible):
            text, _ = await _call(
                task_group, "streamable-http", {"kind": "", "where": "inside", "url": url}, person
            )
            answers.append(text)
    assert answers == [
        'answered: {"action":"accept"}',
        "refused: refused: the link is too long to show whole",
        "refused: refused: the link is too long to show whole",
    ]
    assert [question.url for question in person.asked] == [longest]


class SlowListening:
    """ASGI middleware: the session's listening stream (a GET) reaches the server only after a while."""

    def __init__(self, app: ASGIApp, delay: float) -> None:
        self.app = app
        self.delay = delay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await anyio.sleep(self.delay)
        await self.app(scope, receive, send)


@asynccontextmanager
async def listening_late(delay: float) -> AsyncIterator[RunningServer]:
    """The asking server (the handshake protocol), whose listening stream opens ``delay`` s late."""
    app = OneProtocol(asking_server().streamable_http_app(host="127.0.0.1"), "handshake")
    async with serve_asgi(SlowListening(app, delay=delay), path="/mcp") as served:
        yield served


async def test_a_first_call_waits_for_the_listening_stream_a_question_outside_it_needs(
    task_group: TaskGroup,
) -> None:
    # The server sends its question on the listening stream, and drops it while none is open:
    # a call made before the stream opens would wait out its whole timeout.
    with anyio.fail_after(30):
        async with listening_late(0.5) as served:
            endpoint = Endpoint(server="asking", url=served.url)
            connection = await Connector(HEALTHY).connect(
                endpoint, task_group, elicit=asking(endpoint, Person("/accept age=7"))
            )
            try:
                with anyio.fail_after(10):
                    result = await connection.call_tool("send", {"kind": "elicitation", "where": "outside"})
            finally:
                await connection.aclose()
    assert (
        "".join(texts(result))
        == 'answered: {"action":"accept","content":{"name":"Ada","age":7,"colour":"green","subscribe":false}}'
    )


async def test_a_listening_stream_that_never_opens_delays_the_connect_only_briefly(
    task_group: TaskGroup,
) -> None:
    with anyio.fail_after(30):
        async with listening_late(3600) as served:
            connection = await Connector(HEALTHY).connect(
                Endpoint(server="asking", url=served.url), task_group
            )
            try:
                result = await connection.call_tool("send", {"kind": "ping", "where": "inside"})
            finally:
                await connection.aclose()
    assert texts(result) == ["answered: {}"]


async def test_the_call_timeout_stands_still_while_the_person_answers(task_group: TaskGroup) -> None:
    answered = anyio.Event()

    async def slow_person(question: Question) -> Answer:
        # Longer than the call's own timeout: a person thinking is no hung server.
        await anyio.sleep(1.5)
        answered.set()
        return Answer("accept", {"age": 1})

    settings = ConnectionSettings(connect_timeout=15.0, call_timeout=1.0, close_timeout=5.0)
    with anyio.fail_after(30):
        async with serve_mcp(asking_server(), protocols="handshake") as served:
            endpoint = Endpoint(server="asking", url=served.url)
            connection = await Connector(settings).connect(
                endpoint, task_group, elicit=asking(endpoint, slow_person)
            )
            result = await connection.call_tool("send", {"kind": "elicitation", "where": "inside"})
            await connection.aclose()
    assert answered.is_set()
    assert not result.is_error
    assert '"age":1' in "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_in_a_chat_the_question_goes_to_the_turns_sender_redacted_and_the_answer_never_to_the_model(
    data_dir: Path, host_secret: HostSecret
) -> None:
    token = "tok-" + "q7Z" * 8
    model = RecordingModel()
    host = remote_host(data_dir, host_secret, model, RemoteMcpSettings(connection=HEALTHY))
    leaky = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": f"the header was {token}"}},
    }
    call = json.dumps({"kind": "elicitation", "where": "inside", "schema": leaky})
    with anyio.fail_after(60):
        async with serve_mcp(asking_server(), protocols="handshake") as served, host:
            session = await host.session("console:q", owner="owner")
            added = await host.handle(
                session, msg(f'/mcp_add asking {served.url} --header "X-Key: {token}"'), ScriptedUI()
            )
            assert added is not None and "Added asking" in added.text, added
            ui = ScriptedUI(replies=["/accept name=Grace-Hopper-1906"])
            reply = await host.handle(session, msg(f"asking__send {call}"), ui)
    assert reply is not None
    (question,) = ui.questions
    assert token not in repr(question)
    assert question.fields[0].description == "the header was [redacted]"
    # The server's result repeats the answer: that, and only that, reaches the model.
    assert "Grace-Hopper-1906" in reply.text
    sent = json.dumps([str(step) for step in model.seen])
    assert sent.count("Grace-Hopper-1906") >= 1
    assert "/accept" not in sent


async def test_a_question_outside_any_turn_is_cancelled_without_asking_anyone(
    data_dir: Path, host_secret: HostSecret
) -> None:
    host = remote_host(data_dir, host_secret, settings=RemoteMcpSettings(connection=HEALTHY))
    with anyio.fail_after(60):
        async with serve_mcp(asking_server(), protocols="handshake") as served, host:
            session = await host.session("console:q", owner="owner")
            ui = ScriptedUI(replies=["/accept age=3"])
            added = await host.handle(session, msg(f"/mcp_add asking {served.url}"), ui)
            assert added is not None and "Added asking" in added.text, added
            # A call made by no turn (as a task would be): nobody is asked on the chat's behalf.
            result = await host.call_tool(
                session, "asking__send", {"kind": "elicitation", "where": "outside"}
            )
    assert ui.questions == []
    assert 'answered: {"action":"cancel"}' in str(result)
