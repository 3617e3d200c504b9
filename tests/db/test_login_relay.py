"""A login's redirect lands on any process: two hosts on one database ("two processes").

The owner logs in to a real MCP server that is its own authorization server (``echo_oauth``: its
sign-in redirects at once) from a chat served by process A. The browser's redirect reaches the
public URL, which process B serves (the real route, on loopback): B hands it to A through the
database, A completes the login and the chat connects, and B's page says how it went.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest

from playa.agent import Host
from playa.core import ChatSession
from playa.db import Database, DatabaseStorage, DatabaseUrl, LoginTable, upgrade
from playa.mcp_remote import CALLBACK_PATH, Callbacks, HostSecret, LoginRelay, RemoteMcpExtension
from playa.mcp_remote.store import Sealer
from playa.telegram import RedirectRoute
from playa.telegram._webhook import serve_listener
from servers.echo_oauth import EchoOAuthServer, echo_oauth_server
from support.chat import ScriptedUI, msg
from support.db_text import database_text
from support.host import SETTINGS, new_host
from support.leaks import leaks
from support.oauth import OwnerUI

pytestmark = pytest.mark.anyio

TEST_TIMEOUT = 120.0
WAIT = 60.0
"""A healthy peer on a busy machine: how long B's browser waits for A's outcome."""
SCOPE = "telegram:-1007"
UNKNOWN = "This login link is unknown, used or expired. Run /mcp_auth again in the chat."
RECEIVED = "Playa received the login. The chat will tell you how it ends. You can close this window."


@dataclass
class Processes:
    """Two hosts on one database behind one public URL, which B's listener serves."""

    a: Host
    b: Host
    storage: DatabaseStorage
    public: str

    def extension(self, host: Host) -> RemoteMcpExtension:
        (extension,) = host.extensions
        assert isinstance(extension, RemoteMcpExtension)
        return extension


@contextlib.asynccontextmanager
async def two_processes(
    database: Database, tmp_path: Path, secret: HostSecret, logins: LoginTable | None = None
) -> AsyncIterator[Processes]:
    """A and B on ``database``; their logins in ``logins`` (by default the database's own)."""
    await upgrade(database)
    storage = DatabaseStorage(database)
    listening = anyio.Event()
    port: list[int] = []
    receivers: list[Callbacks] = []

    async def complete(query: str) -> str:
        return await receivers[-1].receive(query)

    def bound(number: int) -> None:
        port.append(number)
        listening.set()

    async with anyio.create_task_group() as tg:
        route = RedirectRoute(path="/playa" + CALLBACK_PATH, complete=complete)
        tg.start_soon(lambda: serve_listener(("127.0.0.1", 0), redirect=route, listening=bound))
        await listening.wait()
        public = f"http://127.0.0.1:{port[0]}/playa"
        hosts = []
        for name in ("a", "b"):
            extension = RemoteMcpExtension(secret, settings=SETTINGS, callbacks=Callbacks(public_url=public))
            extension.share_logins(logins or storage.logins, answer_wait=WAIT)
            hosts.append(new_host(tmp_path / name, None, [extension], storage=storage))
            receivers.append(extension.callbacks)  # the public URL reaches B's listener
        async with hosts[0] as a, hosts[1] as b:
            yield Processes(a, b, storage, public)
        tg.cancel_scope.cancel()


async def link_sent(host: Host, server: EchoOAuthServer) -> tuple[ChatSession, OwnerUI, str]:
    """The owner adds the server in A's chat; the redirect address its sign-in ends at."""
    session = await host.session(SCOPE, owner="owner")
    ui = OwnerUI()
    added = await host.handle(session, msg(f"/mcp_add echo {server.url}"), ui)
    assert added is not None and "needs a login" in added.text, added
    with browser_unlogged():
        async with httpx2.AsyncClient(timeout=WAIT) as browser:
            signed = await browser.get(ui.link_url())
    assert signed.status_code == 302
    return session, ui, signed.headers["location"]


class Waiting(NamedTuple):
    """A login waiting in A's chat: the server, both processes, the chat, its owner, the redirect."""

    server: EchoOAuthServer
    run: Processes
    session: ChatSession
    ui: OwnerUI
    address: str


@contextlib.asynccontextmanager
async def login_waiting(
    database: Database, tmp_path: Path, host_secret: HostSecret
) -> AsyncIterator[Waiting]:
    """Two processes, and the owner's login to the echo server in A's chat, waiting for its redirect,
    all bounded by the test's timeout."""
    with anyio.fail_after(TEST_TIMEOUT):
        async with echo_oauth_server() as server, two_processes(database, tmp_path, host_secret) as run:
            yield Waiting(server, run, *await link_sent(run.a, server))


@contextlib.contextmanager
def browser_unlogged() -> Iterator[None]:
    """The owner's browser runs elsewhere: what its HTTP client logs here (the code, before Playa
    receives it) is not Playa's log, which the tests search."""
    loggers = [logging.getLogger(name) for name in ("httpcore2", "httpx2")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


async def opened(address: str) -> str:
    """The owner's browser at ``address``: the text of the page it shows."""
    async with httpx2.AsyncClient(timeout=WAIT) as browser:
        page = await browser.get(address)
    assert page.status_code == 200
    return page.text


def code_and_state(address: str) -> tuple[str, str]:
    query = parse_qs(urlsplit(address).query)
    return query["code"][0], query["state"][0]


async def test_a_redirect_received_by_another_process_completes_the_login_once_and_its_code_is_stored_nowhere(
    database: Database, tmp_path: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with login_waiting(database, tmp_path, host_secret) as (server, run, session, ui, address):
        assert address.startswith(run.public + CALLBACK_PATH + "?")
        code, state = code_and_state(address)
        assert state not in run.extension(run.b).callbacks.pending  # B never saw this login
        pending = await database_text(database)
        assert "oauth_pending:" in pending and state not in pending

        page = await opened(address)
        assert "Playa received the login for echo. You can close this window." in page
        with anyio.fail_after(WAIT):
            await ui.said.wait()
        assert ui.sent[-1].startswith("Logged in to echo: connected"), ui.sent
        assert server.codes == [code]  # A exchanged it, once
        listed = await run.a.handle(session, msg("/mcp_list"), ScriptedUI())
        assert listed is not None and "echo" in listed.text and "needs a login" not in listed.text

        # Replayed, to either process: refused, and nothing else happens.
        assert UNKNOWN in await opened(address)
        assert await run.extension(run.a).callbacks.receive(urlsplit(address).query) == UNKNOWN
        assert server.codes == [code]

        stored = await database_text(database)
        assert "oauth_pending:" not in stored and "oauth_redirects:" not in stored  # all taken
        for where, text in {"the database": stored, "the log": caplog.text}.items():
            assert leaks({code, state}, text) == [], where


async def test_a_redirect_with_a_state_never_seen_or_another_code_is_refused_and_the_login_still_completes(
    database: Database, tmp_path: Path, host_secret: HostSecret
) -> None:
    async with login_waiting(database, tmp_path, host_secret) as (server, run, _, ui, address):
        code, state = code_and_state(address)
        callback = run.public + CALLBACK_PATH
        for hostile in (
            f"{callback}?code={code}&state=another-state",
            f"{callback}?code={code}",
            f"{callback}?code={code}&state={state}&state=another-state",
            f"{callback}?code=forged&state={state[:-1]}",
        ):
            assert UNKNOWN in await opened(hostile), hostile
        assert server.codes == [] and not ui.said.is_set()

        assert "received the login for echo" in await opened(address)
        with anyio.fail_after(WAIT):
            await ui.said.wait()
        assert ui.sent[-1].startswith("Logged in to echo: connected"), ui.sent


async def test_a_redirect_after_its_login_expired_is_refused_and_completes_nothing(
    database: Database, tmp_path: Path, host_secret: HostSecret
) -> None:
    async with login_waiting(database, tmp_path, host_secret) as (server, run, _, ui, address):
        callbacks = run.extension(run.b).callbacks
        assert callbacks.relay is not None
        # B's clock is past the login's ten minutes (A's is not: its login still waits).
        callbacks.relay = replace(callbacks.relay, clock=lambda: time.time() + 601)
        assert UNKNOWN in await opened(address)
        async with database.connection() as c:
            assert await c.fetchval("SELECT count(*) FROM oauth_pending") == 0  # gone with the take
            assert await c.fetchval("SELECT count(*) FROM oauth_redirects") == 0  # nothing handed
        assert server.codes == [] and not ui.said.is_set()


async def test_a_redirect_received_by_its_own_process_completes_there_and_is_refused_by_the_other_afterwards(
    database: Database, tmp_path: Path, host_secret: HostSecret
) -> None:
    async with login_waiting(database, tmp_path, host_secret) as (server, run, _, ui, address):
        query = urlsplit(address).query
        said = await run.extension(run.a).callbacks.receive(query)
        assert said == "Playa received the login for echo. You can close this window."
        with anyio.fail_after(WAIT):
            await ui.said.wait()
        assert ui.sent[-1].startswith("Logged in to echo: connected"), ui.sent
        # The login's row went when it ended (before its tokens were asked for): B hands nothing on.
        assert "oauth_pending:" not in await database_text(database)
        assert UNKNOWN in await opened(address)
        assert len(server.codes) == 1


async def test_a_pending_login_row_that_a_database_writer_forged_is_refused(
    database: Database, tmp_path: Path, host_secret: HostSecret, caplog: pytest.LogCaptureFixture
) -> None:
    with anyio.fail_after(TEST_TIMEOUT):
        async with two_processes(database, tmp_path, host_secret) as run:
            state = "a-state-the-writer-chose"
            relay = run.extension(run.b).callbacks.relay
            assert relay is not None
            # Sealed with another key, or for another login's state: neither opens.
            other = replace(relay, sealer=Sealer(b"another host secret of 32 bytes!"))
            for sealer_of, sealed_for in ((other, state), (relay, "another-state")):
                login = _Login(SCOPE, "owner", "echo", sealed_for)
                await sealer_of.record(login, time.time() + 600)  # type: ignore[arg-type]
                if sealed_for != state:
                    async with database.connection() as c:
                        await c.execute(
                            "UPDATE oauth_pending SET state_hash = sha256($1::bytea)", state.encode()
                        )
                assert UNKNOWN in await opened(f"{run.public}{CALLBACK_PATH}?code=c0de&state={state}")
                async with database.connection() as c:
                    assert await c.fetchval("SELECT count(*) FROM oauth_redirects") == 0
            assert "does not verify" in caplog.text


@dataclass
class _Login:
    """What ``LoginRelay.record`` reads of a login."""

    scope: str
    owner: str
    server: str
    state: str


async def login_recorded(
    database: Database, host_secret: HostSecret, state: str, **timing: float
) -> tuple[LoginTable, _Login, LoginRelay]:
    """A login the owner started, recorded as A records it when its link goes out (the table at
    the latest schema): the logins table, the login, and the relay, with ``timing``, that recorded it."""
    await upgrade(database)
    rows = DatabaseStorage(database).logins
    login = _Login(SCOPE, "owner", "echo", state)
    relay = LoginRelay(rows, Sealer(host_secret.value), **timing)
    await relay.record(login, time.time() + 600)
    return rows, login, relay


async def test_a_redirect_handed_while_its_process_is_busy_is_sealed_in_the_table_and_completed_later(
    database: Database, host_secret: HostSecret
) -> None:
    # B's browser waits a moment only (the timeout under test): A takes no redirect meanwhile.
    rows, login, b = await login_recorded(database, host_secret, "state-of-a-busy-login", answer_wait=0.2)
    code = "code-the-browser-carried-7f3a9c"
    query = f"code={code}&state={login.state}"
    with anyio.fail_after(WAIT):
        assert await b.hand(login.state, query) == RECEIVED
    stored = await database_text(database)
    assert "oauth_redirects:" in stored and "oauth_pending:" not in stored
    assert leaks({code, login.state}, stored) == []

    # A's listener starts after the NOTIFY went (its poll is an hour): its first look finds it.
    a = replace(b, poll=3600.0)
    completed: list[str] = []

    def complete(received: str) -> str:
        completed.append(received)
        return "Playa received the login for echo. You can close this window."

    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            await tg.start(a.serve, {login.state: login}, complete)
            # What a browser waiting at B would be told, now that A answered.
            said = await rows.outcome(hashlib.sha256(login.state.encode()).digest(), WAIT)
            tg.cancel_scope.cancel()
    assert completed == [query]
    assert said == "Playa received the login for echo. You can close this window."
    async with database.connection() as c:
        assert await c.fetchval("SELECT count(*) FROM oauth_redirects") == 0


async def test_a_waiting_process_is_woken_by_the_notification_not_its_poll(
    database: Database, host_secret: HostSecret
) -> None:
    # An hour between polls: only the NOTIFY can wake A in time; B's browser waits for the outcome.
    _, login, relay = await login_recorded(
        database, host_secret, "state-of-a-waiting-login", answer_wait=WAIT, poll=3600.0
    )
    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            await tg.start(relay.serve, {login.state: login}, lambda query: f"done: {query}")
            said = await relay.hand(login.state, f"code=c0de&state={login.state}")
            tg.cancel_scope.cancel()
    assert said == f"done: code=c0de&state={login.state}"
    async with database.connection() as c:
        assert await c.fetchval("SELECT count(*) FROM oauth_redirects") == 0  # B took the answer


async def test_with_the_logins_table_unreachable_a_login_completes_on_its_own_process_and_another_says_it_could_not_pass_it_on(
    database: Database,
    database_url: str,
    tmp_path: Path,
    host_secret: HostSecret,
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed = await Database.open(DatabaseUrl.parse(database_url))
    await closed.aclose()
    with anyio.fail_after(TEST_TIMEOUT):
        async with (
            echo_oauth_server() as server,
            two_processes(database, tmp_path, host_secret, LoginTable(closed)) as run,
        ):
            _, ui, address = await link_sent(run.a, server)
            assert "could not be recorded for the other processes" in caplog.text
            assert "could not pass this login on" in await opened(address)
            assert server.codes == [] and not ui.said.is_set()
            said = await run.extension(run.a).callbacks.receive(urlsplit(address).query)
            assert said == "Playa received the login for echo. You can close this window."
            with anyio.fail_after(WAIT):
                await ui.said.wait()
            assert ui.sent[-1].startswith("Logged in to echo: connected"), ui.sent
