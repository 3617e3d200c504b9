"""Fuzzing the owner's ``/mcp_*`` commands: only usage errors, and never a credential shown or logged."""

from __future__ import annotations

import itertools
import logging
import shlex
import string
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import playa
from playa.agent import Host, Reply
from playa.core import classify
from playa.exceptions import ConnectFailed, UsageError
from playa.mcp_remote import (
    Connection,
    Connector,
    Endpoint,
    HostSecret,
    NoHostSecret,
    resolve_host_secret,
)
from playa.mcp_remote.commands import carries_secret, parse_add
from support.chat import ScriptedUI, msg
from support.host import remote_host

# Credentials are long and random, so finding one in a reply or a log line is never chance.
# Some start with "-" or "--": generated tokens (token_urlsafe, base64url) can.
_CREDENTIAL_CHARS = string.ascii_letters + string.digits + "-_.~+/="
# Hypothesis also tries string constants it finds in the code under test: a "credential" such as
# MCP_ENCRYPTION_SECRET would then be "leaked" by every message that names the variable.
_OWN_TEXT = "\n".join(
    path.read_text() for path in [*Path(playa.__file__).parent.rglob("*.py"), Path(__file__)]
)

credentials = st.builds(
    lambda prefix, core: prefix + core,
    st.sampled_from(["", "", "", "-", "--"]),
    st.text(alphabet=_CREDENTIAL_CHARS, min_size=16, max_size=40).filter(
        lambda c: not c.startswith("-") and c not in _OWN_TEXT
    ),
)

names = st.sampled_from(["demo", "srv-2", "a", "Demo", "1x", "my__srv", "mcp", "x" * 33, ""])
urls = st.sampled_from(
    [
        "http://127.0.0.1:9/mcp",
        "https://127.0.0.1:9/sse",
        "http://user:pw@127.0.0.1/mcp",
        "ftp://127.0.0.1/mcp",
        "127.0.0.1/mcp",
        "http:///mcp",
        "http://127.0.0.1:99999/mcp",
        "http://[::1/mcp",
        "http://127.0.0.1/\u00e9",
    ]
)
header_names = st.sampled_from(
    ["X-Api-Key", "Authorization", "x-key", "Host", "Mcp-Session-Id", "Bad Name", "K(1)", "", "É"]
)
noise = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"])
    | st.sampled_from(list("\"'\\ =:,-\n\t")),
    max_size=12,
)
flags = st.sampled_from(
    ["--transport", "--tools", "--bearer", "--header", "--sse", "--", "-", "--transport=sse", "--tools=a,b"]
)
values = st.sampled_from(["auto", "http", "sse", "ws", "a,b", ",", "", "X-Key"])


@st.composite
def add_arguments(draw: st.DrawFn, credential: str | None = None) -> str:
    """``/mcp_add`` arguments: mostly plausible, sometimes broken, the credential in a value's place."""
    groups: list[list[str]] = []
    if draw(st.booleans()):
        groups += [[draw(names)], [draw(urls)]]
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["flag", "flag value", "noise", "name", "url", "secret"]))
        if kind == "flag":
            groups.append([draw(flags)])
        elif kind == "flag value":
            groups.append([draw(flags), draw(values)])
        elif kind == "noise":
            groups.append([draw(noise)])
        elif kind == "name":
            groups.append([draw(names)])
        elif kind == "url":
            groups.append([draw(urls)])
        elif credential is not None:
            groups.append(secret_words(credential, draw(header_names), draw(st.integers(0, 4))))
    if credential is not None and not any(credential in word for group in groups for word in group):
        groups.append(secret_words(credential, draw(header_names), draw(st.integers(0, 4))))
    if draw(st.booleans()):
        # Shuffled, but a flag stays with its value: a credential is always where a value goes.
        groups = draw(st.permutations(groups))
    words = [word for group in groups for word in group]
    # A word with a space in it is quoted: unquoted, it would be two words, in other places.
    return " ".join(
        shlex.quote(word)
        if draw(st.booleans()) or not word or not word.isprintable() or " " in word
        else word
        for word in words
    )


@st.composite
def valid_add_arguments(draw: st.DrawFn, credential: str) -> str:
    """``/mcp_add`` arguments that pass validation, so the entry is saved and secrets may be asked."""
    header = draw(st.sampled_from(["X-Api-Key", "X-Token", "Private-Token"]))
    options = [
        secret_words(credential, header if draw(st.booleans()) else "Authorization", draw(st.integers(0, 4)))
    ]
    if draw(st.booleans()):
        options.append(
            ["--bearer"] if not any("--bearer" in w for w in options[0]) else ["--header", "X-Other"]
        )
    if draw(st.booleans()):
        options.append(["--transport", draw(st.sampled_from(["auto", "http", "sse"]))])
    if draw(st.booleans()):
        options.append(["--tools", "echo,add"])
    options = draw(st.permutations(options))
    name = draw(st.sampled_from(["demo", "srv-2", "a"]))
    url = draw(st.sampled_from(["http://127.0.0.1:9/mcp", "https://127.0.0.1:9/sse"]))
    return " ".join(shlex.quote(word) for word in [name, url, *(w for group in options for w in group)])


def secret_words(credential: str, header: str, form: int) -> list[str]:
    """The ways a message can carry a credential inline."""
    return [
        ["--bearer", credential],
        [f"--bearer={credential}"],
        ["--header", f"{header}: {credential}"],
        [f"--header={header}:{credential}"],
        ["--header", f"{header}:", credential],  # the quotes forgotten
    ][form]


def secret_forms(credential: str) -> list[str]:
    """What a reply or a log line must not hold: the credential, and its tail after a dash prefix."""
    return [credential, credential.lstrip("-")]


# The parser alone.


@settings(max_examples=400, deadline=None)
@given(args=st.text(max_size=80) | add_arguments())
def test_parsing_any_arguments_returns_a_request_or_raises_a_usage_error(args: str) -> None:
    try:
        request = parse_add(args)
    except UsageError:
        return
    assert request.name and request.url


@settings(max_examples=300, deadline=None)
@given(args=st.text(max_size=80) | add_arguments())
def test_telling_whether_arguments_carry_a_secret_never_raises(args: str) -> None:
    assert isinstance(carries_secret(args), bool)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), credential=credentials)
def test_arguments_with_an_inline_credential_always_carry_a_secret(
    data: st.DataObject, credential: str
) -> None:
    # A message that is not known to carry a secret is not deleted from the chat.
    args = data.draw(add_arguments(credential))
    assert carries_secret(args), args


@settings(max_examples=400, deadline=None)
@given(data=st.data(), credential=credentials)
def test_a_refused_request_never_quotes_its_credential(data: st.DataObject, credential: str) -> None:
    args = data.draw(add_arguments(credential))
    try:
        shown = repr(parse_add(args))
    except UsageError as exc:
        shown = f"{exc}\n{exc!r}"
    assert not leaked(credential, [shown]), shown


@settings(max_examples=300, deadline=None)
@given(args=add_arguments())
def test_a_parsed_request_with_a_header_value_was_seen_to_carry_a_secret(args: str) -> None:
    try:
        request = parse_add(args)
    except UsageError:
        return
    if request.headers:
        assert carries_secret(args), args


# Whole messages through the host.


class RefusingConnector(Connector):
    """Our own seam: every connect fails at once, so fuzzed URLs never reach a network."""

    async def connect(self, endpoint: Endpoint, *args: object, **kwargs: object) -> Connection:
        raise ConnectFailed("connection refused", server=endpoint.server)


def make_host(data_dir: Path, *, with_secret: bool) -> Host:
    env = {"MCP_ENCRYPTION_SECRET": "x" * 32} if with_secret else {}
    secret = resolve_host_secret(env, data_dir=data_dir, allow_generate=False)
    assert isinstance(secret, HostSecret if with_secret else NoHostSecret)
    return remote_host(data_dir, secret, connector=RefusingConnector())


commands = st.sampled_from(
    [
        "/mcp_add",
        "/mcp_add",
        "/mcp_add",
        "/mcp_add",
        "/mcp_add",
        "/MCP_ADD",
        "/mcp-add",
        "/mcpadd",
        "/mcp",
        "/mcp_list",
    ]
)
_hosts = itertools.count()


def leaked(credential: str, texts: list[str]) -> list[str]:
    return [text for text in texts if any(form in text for form in secret_forms(credential))]


FUZZ_HOST = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass
class Outcome:
    """What the chat saw and what was logged while a host answered some messages."""

    replies: list[Reply]
    ui: ScriptedUI
    logged: list[str]

    def shown(self) -> list[str]:
        return [*(r.text for r in self.replies), *self.ui.sent, *(question for question, _ in self.ui.asked)]


async def answer(
    data_dir: Path,
    caplog: pytest.LogCaptureFixture,
    texts: list[str],
    *,
    with_secret: bool,
    answers: list[str],
) -> Outcome:
    """Messages from the owner to a fresh host, so one example's servers cannot change the next one's."""
    caplog.set_level(logging.DEBUG)
    caplog.clear()
    ui = ScriptedUI(answers=answers)
    replies: list[Reply] = []
    async with make_host(data_dir / f"host-{next(_hosts)}", with_secret=with_secret) as host:
        session = await host.session("console:fuzz", owner="owner")
        for number, text in enumerate(texts, 1):
            reply = await host.handle(session, msg(text, ref=f"m{number}"), ui)
            assert reply is not None
            assert reply.kind == "command"
            # An exception other than a usage error ends up as "Sorry, /x failed: …" and a logged error.
            assert not reply.text.startswith("Sorry,"), reply.text
            replies.append(reply)
    # asyncio's own records are the test runner's: hypothesis ends an example with StopTest.
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.name != "asyncio"]
    logged = [logging.Formatter().format(record) for record in caplog.records]
    return Outcome(replies, ui, logged)


@pytest.mark.anyio
@FUZZ_HOST
@given(data=st.data(), with_secret=st.booleans(), command=commands, credential=credentials, asked=credentials)
async def test_any_mcp_command_is_answered_without_a_crash_and_never_shows_or_logs_a_credential(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    data: st.DataObject,
    with_secret: bool,
    command: str,
    credential: str,
    asked: str,
) -> None:
    args = data.draw(st.one_of(add_arguments(credential), valid_add_arguments(credential)))
    outcome = await answer(
        tmp_path, caplog, [f"{command} {args}"], with_secret=with_secret, answers=[asked, asked]
    )
    event(f"reply: {' '.join(outcome.replies[0].text.split()[:2])}")
    for secret in (credential, asked):
        assert not leaked(secret, outcome.shown()), outcome.shown()
        assert not leaked(secret, outcome.logged), outcome.logged
    if command != "/mcp_list" and carries_secret(args):
        assert outcome.ui.deleted == ["m1"]


@pytest.mark.anyio
@FUZZ_HOST
@given(data=st.data(), credential=credentials, asked=credentials)
async def test_a_saved_server_never_shows_or_logs_its_credentials(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, data: st.DataObject, credential: str, asked: str
) -> None:
    args = data.draw(valid_add_arguments(credential))
    texts = [
        f"/mcp_add {args}",
        "/mcp_list",
        "/mcp_tools",
        "/mcp_add " + args.replace("127.0.0.1:9", "127.0.0.1:7"),
    ]
    outcome = await answer(tmp_path, caplog, texts, with_secret=True, answers=[asked] * 4)
    event(f"reply: {' '.join(outcome.replies[0].text.split()[:2])}")
    for secret in (credential, asked):
        assert not leaked(secret, outcome.shown()), outcome.shown()
        assert not leaked(secret, outcome.logged), outcome.logged


@pytest.mark.anyio
@pytest.mark.parametrize("command", ["/mcp_remove", "/mcp_tools"])
async def test_a_key_given_to_the_wrong_command_is_neither_shown_nor_left_in_the_chat(
    tmp_path: Path, command: str
) -> None:
    credential = "k3y-given-to-the-wrong-command"
    async with make_host(tmp_path, with_secret=True) as host:
        session = await host.session("console:wrong-command", owner="owner")
        ui = ScriptedUI()
        reply = await host.handle(session, msg(f"{command} --header=X-Key:{credential}", ref="m1"), ui)
    assert reply is not None
    assert credential not in reply.text
    assert ui.deleted == ["m1"]


# Messages that are close to a command, or mix a sentence and a key: the one inbound classifier.

_COMMANDS = make_host(Path("/nonexistent"), with_secret=False).commands
NEAR_SPELLINGS = [
    "mcp_add",
    "\\mcp_add",
    "//mcp_add",
    "\\\\mcp_add",
    "/mcp-add",
    "/add-mcp",
    "add-mcp",
    "add_mcp",
    "mcpadd",
    "MCP_ADD",
    "\\mcp_remove",
    "//mcp_list",
    "mcp-tools",
]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), spelling=st.sampled_from(NEAR_SPELLINGS), credential=credentials)
def test_a_message_close_to_a_command_with_an_inline_credential_never_reaches_the_model(
    data: st.DataObject, spelling: str, credential: str
) -> None:
    args = data.draw(add_arguments(credential))
    inbound = classify(f"{spelling} {args}", _COMMANDS)
    assert not inbound.to_model, (spelling, args)
    assert inbound.carries_secret


# Lower case: a word of random mixed case may well be a key (AKIAbCdEfGhI).
_PROSE = st.text(alphabet=string.ascii_lowercase + "  ,.?!'", max_size=40)
_KNOWN = [
    "ghp_",
    "gho_",
    "github_pat_",
    "sk-",
    "sk-ant-api03-",
    "sk-proj-",
    "xoxb-",
    "xoxp-",
    "AKIA",
    "AIza",
    "glpat-",
]
_KEY_CORE = st.text(alphabet=string.ascii_letters + string.digits, min_size=20, max_size=60).filter(
    lambda core: any(c.isdigit() for c in core)
)


@settings(max_examples=400, deadline=None)
@given(
    before=_PROSE,
    prefix=st.sampled_from(_KNOWN),
    core=_KEY_CORE,
    after=st.sampled_from(["", ".", ",", "!", ")", "?"]),
    rest=_PROSE,
)
def test_a_well_known_key_in_a_sentence_never_reaches_the_model(
    before: str, prefix: str, core: str, after: str, rest: str
) -> None:
    key = prefix + core
    inbound = classify(f"{before} {key}{after} {rest}", _COMMANDS)
    assert not inbound.to_model or key not in inbound.model_text, inbound.model_text
    assert inbound.carries_secret
    assert core[-12:] not in inbound.model_text or not inbound.to_model


@settings(max_examples=300, deadline=None)
@given(text=_PROSE)
def test_a_sentence_without_a_key_reaches_the_model_unchanged(text: str) -> None:
    inbound = classify(text, _COMMANDS)
    assert inbound.model_text == inbound.text
    assert inbound.near_command is None
