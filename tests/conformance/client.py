"""Client adapter run by the MCP conformance suite (``conformance client --command ...``).

The suite starts a test server for one scenario, then runs this program with the server's URL
as the last argument and the scenario name in ``MCP_CONFORMANCE_SCENARIO``. The program does
what the scenario expects and exits 0; the suite judges what reached its server.

The client is Playa's own connection layer (``playa.mcp_remote.transport._connection``), all of it inside
``connect``; the test runs this program with ``src`` on ``PYTHONPATH``. A server's questions
(elicitation) go through Playa's own conversion to a person's question and back; the person
here answers ``/accept`` alone, so every field takes its default (SEP-1034).

An ``auth/*`` scenario runs a whole console host instead (``playa chat`` minus the terminal):
the owner sends ``/mcp_add``, Playa starts its login and sends the link privately, and this
program plays the owner's browser. The suite's authorization server approves at once and
redirects to the redirect URI Playa registered, which is Playa's loopback callback; the browser
follows that one redirect, Playa exchanges the code and connects, and the owner calls the
server's tool through the offline model. A call refused for a scope sends the owner a new link by
itself, which the browser follows as before. Where Playa says the owner can run ``/mcp_auth``,
the owner does, as a person would, up to ``OWNER_PATIENCE``
times: how many logins a server gets is Playa's own limit to keep. A login that fails ends the
run with an error, which the scenarios that expect a refusal allow.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx2
import mcp_types as types
from anyio.abc import TaskGroup

from playa.agent import Host, HostConfig
from playa.cli import remote_mcp
from playa.core import Answer, ChatSession, IncomingMessage, Question, Sender, answer_from_text
from playa.exceptions import RemoteError, SkillRefused
from playa.mcp_remote import Connection as PlayaConnection
from playa.mcp_remote import (
    ConnectionSettings,
    Connector,
    Endpoint,
    asking,
    list_skills,
    load_skill,
    offers_skills,
    read_skill_file,
    skills_of,
)

SCENARIO_TIMEOUT = 45.0
AUTH_SCENARIO_TIMEOUT = 110.0
"""Under the suite's client timeout for them (120 s): a stuck login fails here, saying where it was."""
CIMD_URL = "https://conformance-test.local/client-metadata.json"
"""Where the suite's authorization servers expect a client's metadata document (SEP-991)."""
OWNER_PATIENCE = 5
"""How many times the owner runs ``/mcp_auth`` when Playa says to: more than Playa may need."""
OWNER = Sender(id="owner", name="Owner", is_owner=True)
SERVER = "conformance"


@dataclass
class Connection:
    """What a scenario needs from a connected client: the tool names and a way to call one."""

    tools: list[str]
    listed: Sequence[types.Tool]
    call_tool: Callable[[str, dict[str, Any]], Awaitable[str]]
    playa: PlayaConnection


async def _accept_defaults(question: Question) -> Answer:
    """The person who answers every question with ``/accept`` alone: each field takes its default."""
    answer = answer_from_text(question, "/accept")
    assert isinstance(answer, Answer), answer
    return answer


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Connection]:
    """Connect to ``url`` with Playa's connection layer (transport "auto"), and close on exit."""
    async with anyio.create_task_group() as tg:
        endpoint = Endpoint(server="conformance", url=url, transport="auto", headers={})
        connection = await Connector(ConnectionSettings(connect_timeout=30, call_timeout=30)).connect(
            endpoint, tg, elicit=asking(endpoint, _accept_defaults)
        )
        try:

            async def call_tool(name: str, arguments: dict[str, Any]) -> str:
                result = await connection.call_tool(name, arguments)
                text = " ".join(
                    block.text for block in result.content if isinstance(block, types.TextContent)
                )
                if result.is_error:
                    raise RuntimeError(f"tool {name} failed: {text}")
                return text

            yield Connection(
                tools=[tool.name for tool in connection.tools],
                listed=connection.tools,
                call_tool=call_tool,
                playa=connection,
            )
        finally:
            await connection.aclose()


async def _initialize(url: str) -> None:
    async with connect(url):
        pass


async def _add_numbers(url: str) -> None:
    async with connect(url) as connection:
        print(await connection.call_tool("add_numbers", {"a": 5, "b": 3}))


async def _elicitation_defaults(url: str) -> None:
    async with connect(url) as connection:
        print(await connection.call_tool("test_client_elicitation_defaults", {}))


async def _sse_retry(url: str) -> None:
    async with connect(url) as connection:
        print(await connection.call_tool("test_reconnection", {}))


async def _request_state(url: str) -> None:
    async with connect(url) as connection:
        for name in (
            "test_mrtr_echo_state",
            "test_mrtr_unrelated",
            "test_mrtr_no_state",
            "test_mrtr_no_result_type",
        ):
            print(await connection.call_tool(name, {}))


_STUBS: dict[str, Any] = {
    "string": "x",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "object": {},
    "array": [],
    "null": None,
}


async def _every_tool(url: str) -> None:
    """Call every tool Playa offers, with the least arguments its schema requires."""
    async with connect(url) as connection:
        for tool in connection.listed:
            properties = tool.input_schema.get("properties", {})
            arguments = {
                name: _STUBS.get(properties.get(name, {}).get("type"), "x")
                for name in tool.input_schema.get("required", [])
            }
            await _tolerant(connection, tool.name, arguments)


async def _replayed_calls(url: str) -> None:
    """Make the calls the suite names in its context, with its arguments as they are."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    async with connect(url) as connection:
        for call in context.get("toolCalls", []):
            if call["name"] in connection.tools:
                await _tolerant(connection, call["name"], call.get("arguments") or {})


async def _tolerant(connection: Connection, name: str, arguments: dict[str, Any]) -> None:
    # These scenarios judge the requests; a call the mock server refuses is no failure here.
    try:
        print(await connection.call_tool(name, arguments))
    except (RuntimeError, RemoteError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)


async def _schema_echo(url: str) -> None:
    async with connect(url) as connection:
        focal = next(tool for tool in connection.listed if tool.name == "json_schema_2020_12_tool")
        print(await connection.call_tool("json_schema_echo", {"schema": focal.input_schema}))


async def _skills(url: str, *, load: bool) -> list[str]:
    """List the server's skills as Playa does (no file read); with ``load``, load each as the agent would.

    Loading reads a skill's SKILL.md and checks it against its entry; only a skill that passes
    has its other files read, each checked too. What Playa refused is returned.
    """
    refusals: list[str] = []
    async with connect(url) as connection:
        assert offers_skills(connection.playa), "the server did not declare the skills extension"
        skills, refused = skills_of(SERVER, await list_skills(connection.playa, timeout=30))
        refusals += refused
        print("skills:", ", ".join(skills))
        for skill in skills.values() if load else ():
            try:
                loaded = await load_skill(connection.playa, skill, timeout=30)
                for path in loaded.others:
                    await read_skill_file(connection.playa, skill, path, timeout=30)
            except SkillRefused as exc:
                refusals.append(f"{skill.name}: {exc.reason}")
    for refusal in refusals:
        print(f"refused: {refusal}", file=sys.stderr)
    return refusals


async def _skills_listed(url: str) -> None:
    await _skills(url, load=False)


async def _skills_loaded(url: str) -> None:
    await _skills(url, load=True)


@dataclass(eq=False)
class Owner:
    """The console's owner (Playa's ``UI``): reads the chat, and opens each private link in a browser.

    What Playa says outside a command's reply (how a login ended) arrives on ``said``.
    """

    tg: TaskGroup
    private_place: str = "above"
    key: str | None = None
    """The private key the owner sends when Playa asks for one in secret (``--client-key`` alone)."""
    id_token: str | None = None
    """The owner's ID token at their IdP, sent when Playa asks for it (``--id-token`` alone)."""
    said: list[str] = field(default_factory=list)
    news: anyio.Event = field(default_factory=anyio.Event)

    async def send(self, text: str) -> int:
        print(f"playa> {text}", file=sys.stderr)
        self.said.append(text)
        self.news.set()
        return len(self.said)

    async def send_private(self, text: str) -> int:
        print(f"playa (private)> {text}", file=sys.stderr)
        # The link is on a line of its own.
        (link,) = [line for line in text.splitlines() if line.startswith("http")]
        self.tg.start_soon(_browse, link)
        return 0

    async def ask(self, question: str, *, secret: bool = False, timeout: float = 300.0) -> str | None:
        print(f"playa asks> {question}", file=sys.stderr)
        if secret and "ID token" in question:
            return self.id_token
        return self.key if secret and "private key" in question else None

    async def question(self, question: Question, *, timeout: float = 300.0) -> Answer:
        return await _accept_defaults(question)

    async def delete(self, ref: object) -> bool:
        return False

    async def notify(self, text: str) -> None:
        pass

    async def next_said(self) -> str:
        """The next thing Playa says in the chat outside a reply (a login's outcome)."""
        seen = len(self.said)
        while len(self.said) == seen:
            self.news = anyio.Event()
            await self.news.wait()
        return self.said[seen]

    async def command(self, host: Host, session: ChatSession, text: str) -> str:
        print(f"owner> {text}", file=sys.stderr)
        reply = await host.handle(session, IncomingMessage(text=text, sender=OWNER), self)
        answer = reply.text if reply is not None else ""
        print(f"playa> {answer}", file=sys.stderr)
        return answer


async def _browse(link: str) -> None:
    """The owner's browser: the authorization server approves at once, and its redirect goes to Playa."""
    async with httpx2.AsyncClient() as browser:
        page = await browser.get(link)
        location = page.headers.get("location")
        if not page.is_redirect or location is None:
            print(f"browser: the authorization page answered HTTP {page.status_code}", file=sys.stderr)
            return
        target = urljoin(link, location)
        if urlsplit(target).hostname != "127.0.0.1":
            print(f"browser: redirected to {target}, not to Playa's callback", file=sys.stderr)
            return
        callback = await browser.get(target)
        print(f"browser: Playa's callback page said: {callback.text}", file=sys.stderr)


def _add_command(url: str) -> str:
    """``/mcp_add`` as the owner would type it, with the client the suite registered for them, if
    any: a machine's (client credentials) with its secret, or with its key, which Playa asks for."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    words = ["/mcp_add", SERVER, url]
    if client_id := context.get("client_id"):
        words += ["--client-id", client_id]
        if client_secret := context.get("client_secret"):
            words += ["--client-secret", client_secret]
        if context.get("private_key_pem"):
            words += ["--client-key"]
    if os.environ.get("MCP_CONFORMANCE_SCENARIO", "").startswith("auth/client-credentials"):
        words += ["--grant", "client-credentials"]
    if idp := context.get("idp_issuer"):
        # Enterprise-managed authorization: the ID token is asked for in secret (Owner.ask).
        words += [
            "--grant",
            "enterprise",
            "--idp",
            idp,
            "--idp-client-id",
            context["idp_client_id"],
            "--id-token",
        ]
    return shlex.join(words)


async def _log_in_and_call(url: str) -> None:
    """Add the server as the owner, log in when Playa asks, and call its first tool."""
    environ = {
        **os.environ,
        "MCP_ENCRYPTION_SECRET": secrets.token_urlsafe(32),
        "PLAYA_OAUTH_CLIENT_METADATA_URL": CIMD_URL,
    }
    with tempfile.TemporaryDirectory() as data_dir:
        config = HostConfig(data_dir=Path(data_dir))
        async with (
            Host(config, [remote_mcp(config, environ, console=True)]) as host,
            anyio.create_task_group() as tg,
        ):
            context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
            owner = Owner(tg, key=context.get("private_key_pem"), id_token=context.get("idp_id_token"))
            session = await host.session(f"console:{SERVER}", owner=OWNER.id)
            reply = await owner.command(host, session, _add_command(url))
            for _ in range(OWNER_PATIENCE):
                if f"The login to {SERVER} failed" in reply:
                    # It failed before any link went out (discovery, registration): the reply says so.
                    raise SystemExit(f"the login did not succeed: {reply}")
                if "link to log in" in reply:
                    outcome = await owner.next_said()
                    if not outcome.startswith("Logged in"):
                        raise SystemExit(f"the login did not succeed: {outcome}")
                    reply = outcome  # the reply that started the login names /mcp_auth as well
                tools = await owner.command(host, session, f"/mcp_tools {SERVER}")
                if tools.startswith(f"{SERVER}__"):
                    tool = tools.split(" ", 1)[0]
                    reply = await owner.command(host, session, tool)
                    if f"{tool} returned:" in reply:
                        break
                if "The owner was sent a link" in reply:
                    continue  # a step-up: Playa asked the owner by itself, and the login's outcome follows
                if f"/mcp_auth {SERVER}" not in reply + tools:
                    raise SystemExit(f"Playa could not call the server's tool: {reply}")
                reply = await owner.command(host, session, f"/mcp_auth {SERVER}")
            else:
                raise SystemExit("the owner ran out of patience")
            tg.cancel_scope.cancel()


SCENARIOS: dict[str, Callable[[str], Awaitable[None]]] = {
    "initialize": _initialize,
    "tools_call": _add_numbers,
    "elicitation-sep1034-client-defaults": _elicitation_defaults,
    "sse-retry": _sse_retry,
    "request-metadata": _add_numbers,
    "sep-2322-client-request-state": _request_state,
    "http-standard-headers": _add_numbers,
    "http-custom-headers": _replayed_calls,
    "http-invalid-tool-headers": _every_tool,
    "json-schema-ref-no-deref": _initialize,
    "json-schema-2020-12-preservation": _schema_echo,
    "sep-2640-client-no-prefetch": _skills_listed,
    "sep-2640-client-verify-digest": _skills_loaded,
    "sep-2640-client-verify-size": _skills_loaded,
    "sep-2640-client-verify-frontmatter": _skills_loaded,
}
"""Every scenario's own steps; an ``auth/*`` scenario not named here logs in and calls a tool."""


def main(argv: list[str]) -> int:
    """Run the scenario named in the environment against the URL given last on the command line."""
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    run = SCENARIOS.get(scenario, _log_in_and_call if scenario.startswith("auth/") else None)
    if len(argv) < 2 or run is None:
        print(
            f"usage: MCP_CONFORMANCE_SCENARIO=<{'|'.join(SCENARIOS)}|auth/…> client.py <url>", file=sys.stderr
        )
        return 2

    async def bounded() -> None:
        with anyio.fail_after(AUTH_SCENARIO_TIMEOUT if scenario.startswith("auth/") else SCENARIO_TIMEOUT):
            await run(argv[-1])

    anyio.run(bounded)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
