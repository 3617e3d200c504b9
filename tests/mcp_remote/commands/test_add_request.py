"""Parsing ``/mcp_add``: every rule refuses with its own clear message, before any secret is asked;
what its arguments carry; and the secrets it asks for."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from playa.core import ChatSession
from playa.exceptions import UsageError, ValidationError
from playa.mcp_remote import HostSecret, ServerStore
from playa.mcp_remote.commands import RESERVED_HEADERS, carries_secret, parse_add
from playa.mcp_remote.store import Sealer, ServerEntry, store_path
from servers.python_servers import closed_port
from support.chat import Script, ScriptedUI, msg
from support.host import remote_host
from support.remote import OwnerChat

NAME_RULE = "the name must be 1-32 characters: a lowercase letter, then lowercase letters, digits or '-'"
URL_SCHEME_RULE = "url must be http:// or https:// with a host"
SHORT_PASSWORD = "the password in the URL is shorter than 8 characters, too short to be hidden safely; it holds a credential"
SHORT_USER = "the user part of the URL is shorter than 8 characters, too short to be hidden safely; it holds a credential"
SHORT_BEARER = "the bearer token is shorter than 8 characters, too short to be hidden safely in tool results"
USAGE_LINE = "usage: /mcp_add <name> <url> [options]; /mcp_add --help explains them"
OPTIONS = "Options: --transport, --tools, --bearer, --header, --secret-url, --oauth, --client-id, --client-secret, --client-key, --grant, --policy, --idp, --idp-client-id, --id-token"

# Written out rather than read from RESERVED_HEADERS, so that dropping one from the set fails a test.
TRANSPORT_HEADERS = [
    "Host",
    "Content-Length",
    "Content-Type",
    "Content-Encoding",
    "Transfer-Encoding",
    "Accept",
    "Accept-Encoding",
    "Connection",
    "Keep-Alive",
    "Upgrade",
    "TE",
    "Trailer",
    "Expect",
    "Proxy-Authorization",
    "Proxy-Connection",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Last-Event-ID",
]


@pytest.mark.parametrize(
    ("args", "field", "message"),
    [
        pytest.param("Demo http://x", "name", NAME_RULE, id="uppercase name"),
        pytest.param("1demo http://x", "name", NAME_RULE, id="name starting with a digit"),
        pytest.param("my__srv http://x", "name", NAME_RULE, id="name with __"),
        pytest.param("my_srv http://x", "name", NAME_RULE, id="name with _"),
        pytest.param("a" * 33 + " http://x", "name", NAME_RULE, id="name of 33 characters"),
        pytest.param(
            "mcp http://x", "name", "the name 'mcp' is reserved; choose another", id="reserved name"
        ),
        pytest.param("demo ftp://example.com/mcp", "url", URL_SCHEME_RULE, id="ftp url"),
        pytest.param("demo file:///etc/passwd", "url", URL_SCHEME_RULE, id="file url"),
        pytest.param("demo example.com/mcp", "url", URL_SCHEME_RULE, id="url without scheme"),
        pytest.param("demo http:///mcp", "url", URL_SCHEME_RULE, id="url without host"),
        pytest.param("demo https://user:pass123@example.com/mcp", "url", SHORT_PASSWORD, id="short password"),
        pytest.param("demo https://tok1234@example.com/mcp", "url", SHORT_USER, id="short user only"),
        pytest.param(
            "demo https://example.com/mcp?API-Key=abc",
            "url",
            "the value of the URL's query parameter 'api-key' is shorter than 8 characters, "
            "too short to be hidden safely; it holds a credential",
            id="short key by name",
        ),
        pytest.param(
            "demo https://example.com/mcp --secret-url",
            "url",
            "--secret-url: no path segment or query value of the URL is 8 characters or longer, "
            "so none could be hidden safely; send the key in a header instead",
            id="secret url with nothing long enough",
        ),
        pytest.param(
            'demo http://x --header "Bad Name: value12345"',
            "header",
            "the --header at word 3 has no valid header name (letters, digits and -, no spaces)",
            id="header name with a space",
        ),
        pytest.param(
            "demo http://x --header X-Key(1)",
            "header",
            'the --header at word 3 is neither "Name: value" nor a header name (a colon may be missing)',
            id="header name with parentheses",
        ),
        pytest.param(
            'demo http://x --header "X-Key: abcd\nefghijkl"',
            "header",
            "the value of X-Key must not contain line breaks",
            id="LF in a header value",
        ),
        pytest.param(
            'demo http://x --header "X-Key: abcd\refghijkl"',
            "header",
            "the value of X-Key must not contain line breaks",
            id="CR in a header value",
        ),
        pytest.param(
            'demo http://x --bearer "abcd\r\nefghijkl"',
            "header",
            "the bearer token must not contain line breaks",
            id="CRLF in a bearer token",
        ),
        pytest.param("demo http://x --bearer 1234567", "header", SHORT_BEARER, id="bearer of 7 characters"),
        pytest.param(
            'demo http://x --header "X-Key: 1234567"',
            "header",
            "the value of X-Key is shorter than 8 characters, too short to be hidden safely in tool results",
            id="header value of 7 characters",
        ),
        pytest.param(
            "demo http://x --bearer abcdefgh1 --bearer abcdefgh2",
            "bearer",
            "--bearer is given twice",
            id="bearer twice with values",
        ),
        pytest.param(
            "demo http://x --bearer --bearer", "bearer", "--bearer is given twice", id="bearer twice"
        ),
        pytest.param(
            'demo http://x --bearer abcdefgh1 --header "authorization: abcdefgh12"',
            "header",
            "authorization is given twice",
            id="bearer and an Authorization header",
        ),
        pytest.param(
            "demo http://x --header X-Key --header x-key",
            "header",
            "x-key is given twice",
            id="a header asked twice",
        ),
        pytest.param(
            "demo http://x --transport ws",
            "transport",
            "--transport takes auto, http or sse",
            id="bad transport",
        ),
        pytest.param(
            "demo http://x --tools ,",
            "tools",
            "--tools takes a comma-separated list of tool names",
            id="empty tool list",
        ),
        pytest.param(
            "demo http://x --tools a,b,a", "tools", "a tool is listed twice", id="tool listed twice"
        ),
        pytest.param(
            "demo http://x --header",
            "header",
            '--header takes "Name: value", or a header name to be asked for',
            id="header without anything",
        ),
    ],
)
def test_each_validation_rule_refuses_with_its_own_message(args: str, field: str, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_add(args)
    assert str(raised.value) == message
    assert raised.value.field == field


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            "demo http://x --token abcdefgh1", f"unknown option --token. {OPTIONS}", id="unknown option"
        ),
        pytest.param(
            "demo http://x --bearer=abcdefgh1 --sse", f"unknown option --sse. {OPTIONS}", id="no --sse"
        ),
        pytest.param(
            'demo "http://x --bearer abcdefgh1',
            "I could not read the arguments (No closing quotation); check the quotes.",
            id="unbalanced quotes",
        ),
        pytest.param("demo", USAGE_LINE, id="missing url"),
        pytest.param("", USAGE_LINE, id="nothing"),
        pytest.param("--bearer abcdefgh1", USAGE_LINE, id="only an option"),
        pytest.param("demo http://x http://y", USAGE_LINE, id="one word too many"),
    ],
)
def test_malformed_arguments_get_a_usage_error(args: str, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_add(args)
    assert str(raised.value) == message
    assert not isinstance(raised.value, ValidationError)


@pytest.mark.parametrize("header", TRANSPORT_HEADERS)
def test_each_header_the_transport_owns_is_refused_with_or_without_a_value(header: str) -> None:
    expected = f"{header} is set by the transport itself and cannot be given"
    with pytest.raises(ValidationError) as given:
        parse_add(f'demo http://x --header "{header}: value12345"')
    assert str(given.value) == expected
    with pytest.raises(ValidationError) as asked:
        parse_add(f"demo http://x --header {header}")
    assert str(asked.value) == expected
    with pytest.raises(ValidationError) as lower:
        parse_add(f'demo http://x --header "{header.lower()}: value12345"')
    assert str(lower.value) == f"{header.lower()} is set by the transport itself and cannot be given"


def test_the_reserved_headers_are_exactly_the_transport_headers() -> None:
    assert {h.lower() for h in TRANSPORT_HEADERS} == set(RESERVED_HEADERS)
    assert "authorization" not in RESERVED_HEADERS


def test_a_refused_value_is_never_quoted_in_the_error() -> None:
    for args, value in [
        ("demo http://x --bearer sh0rt!", "sh0rt!"),
        ('demo http://x --header "X-Key: l1ne\nbr3ak-value"', "l1ne"),
        ('demo http://x --bearer "l1ne\rbr3ak-value"', "br3ak-value"),
    ]:
        with pytest.raises(ValidationError) as raised:
            parse_add(args)
        assert value not in str(raised.value)
        assert value not in repr(raised.value)


def test_a_full_command_is_parsed_into_its_parts() -> None:
    request = parse_add(
        "docs https://example.com/mcp --transport http --tools search,fetch "
        "--bearer TOKEN-abcdefgh --header 'X-Team: team-value-1' --header X-Asked"
    )
    assert request.name == "docs"
    assert request.url == "https://example.com/mcp"
    assert request.transport == "streamable-http"
    assert request.tools == ("search", "fetch")
    assert request.bearer
    assert dict(request.headers) == {"Authorization": "Bearer TOKEN-abcdefgh", "X-Team": "team-value-1"}
    assert request.ask == ["X-Asked"]
    assert "TOKEN-abcdefgh" not in repr(request) and "team-value-1" not in repr(request)


@pytest.mark.parametrize(
    ("args", "headers", "ask"),
    [
        ("demo http://x --bearer", {}, ["Authorization"]),
        ("--bearer demo http://x", {}, ["Authorization"]),
        ("demo http://x --bearer --tools a", {}, ["Authorization"]),
        ("demo http://x --bearer=abcdefgh1", {"Authorization": "Bearer abcdefgh1"}, []),
        ("demo http://x --header=X-Key", {}, ["X-Key"]),
        ("demo http://x --header=X-Key:abcdefgh1", {"X-Key": "abcdefgh1"}, []),
    ],
)
def test_a_flag_without_a_value_is_asked_for_later(
    args: str, headers: dict[str, str], ask: list[str]
) -> None:
    request = parse_add(args)
    assert dict(request.headers) == headers
    assert request.ask == ask


@pytest.mark.parametrize(
    ("word", "transport"), [("auto", "auto"), ("http", "streamable-http"), ("sse", "sse")]
)
def test_transport_names(word: str, transport: str) -> None:
    assert parse_add(f"demo http://x --transport {word}").transport == transport


@pytest.mark.parametrize(
    "args",
    [
        "demo http://x --bearer SECRET123",
        "demo http://x --bearer=SECRET123",
        "--bearer SECRET123 demo http://x",
        'demo http://x --header "X-Key: SECRET123"',
        "demo http://x --header=X-Key:SECRET123",
        "demo http://x --header X-Key:SECRET123",
        'demo "http://x --bearer SECRET123',  # unreadable, but may hold a key
        "demo 'http://x --header X-Key: SECRET123",
        'demo http://x --header "X-Api-Key Zq7Xw3KpL9mN2bV4"',  # the colon forgotten
        "demo http://x --header Zq7Xw3KpL9mN2bV4cX8dR1",  # a key where the name goes
        "demo http://x --header=Zq7Xw3KpL9mN2bV4cX8dR1",
        "demo http://x Zq7Xw3KpL9mN2bV4cX8dR1",  # a key anywhere
        "demo http://x --tools ghp_abcdefghijklmnop",
        '"demo http://x ghp_abcdefghijklmnop',  # unreadable, with a key-shaped word
        "demo https://example.com/mcp?api_key=abcdefgh12",
        "demo https://example.com/mcp?key=abc",  # refused as too short, but a key all the same
        "demo https://user:pass12345@example.com/mcp",
        "demo https://example.com/Zq7Xw3KpL9mN2bV4cX8dR1/mcp",
        "demo https://example.com/s/abcdefghij/mcp --secret-url",
        "demo https://example.com/" + "x" * 3000 + "?api_key=abcdefgh12",  # too long to be a URL
        "demo http://[::1/mcp?token=Zq7Xw3KpL9mN2bV4cX8dR1",  # does not split
    ],
)
def test_arguments_holding_a_credential_carry_a_secret(args: str) -> None:
    assert carries_secret(args)


@pytest.mark.parametrize(
    "args",
    [
        "",
        "demo http://x",
        "demo http://x --bearer",
        "demo http://x --bearer --tools a,b",
        "demo http://x --header X-Key",
        "demo http://x --header=X-Key",
        "demo http://x --transport sse --tools a",
        '"unbalanced',
        "demo http://127.0.0.1:8000/mcp --header X-Custom-Header-Name",
        "demo https://example.com/v1/mcp?format=json&limit=20",
        "docs https://example.com/mcp --tools search_documents,fetch_page",
    ],
)
def test_arguments_without_a_credential_carry_no_secret(args: str) -> None:
    assert not carries_secret(args)


def saved_entries(session: ChatSession, secret: HostSecret) -> tuple[ServerEntry, ...]:
    """The entries the chat's file holds, read as another process would."""
    return ServerStore(session.workspace, session.scope, Sealer(secret.value)).load().entries


def _nothing(messages: object, info: object) -> ModelResponse:
    return ModelResponse(parts=[TextPart("the model should not have been asked")])


@pytest.mark.anyio
async def test_a_mistyped_add_with_a_key_is_deleted_and_never_reaches_the_model(
    data_dir: Path, host_secret: HostSecret
) -> None:
    script = Script([_nothing])
    host = remote_host(data_dir, host_secret, script)
    async with host:
        session = await host.session("console:t", owner="owner")
        ui = ScriptedUI()
        reply = await host.handle(session, msg("/mcp_ad demo http://x --bearer SECRET123", ref=11), ui)
    assert reply is not None and reply.kind == "command"
    assert reply.text.startswith("Unknown command.")
    assert "mcp_ad " not in reply.text
    assert "/mcp_add" in reply.text
    assert "SECRET123" not in reply.text
    assert ui.deleted == [11]
    assert script.seen == []
    assert host.history(session).messages == []
    assert not host.history(session).path.exists()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/mcp_add demo ftp://example.com/mcp --bearer", URL_SCHEME_RULE),
        ("/mcp_add demo https://me:pw12345@example.com/mcp --bearer", SHORT_PASSWORD),
        ("/mcp_add demo http://x --header Host", "Host is set by the transport itself and cannot be given"),
        ("/mcp_add demo http://x --tools a,a --bearer", "a tool is listed twice"),
        ("/mcp_add mcp http://x --bearer", "the name 'mcp' is reserved; choose another"),
    ],
)
async def test_an_invalid_add_is_refused_before_any_secret_is_asked(
    data_dir: Path, host_secret: HostSecret, text: str, expected: str
) -> None:
    script = Script([_nothing])
    host = remote_host(data_dir, host_secret, script)
    async with host:
        session = await host.session("console:t", owner="owner")
        ui = ScriptedUI(answers=["would-be-token-123"])
        reply = await host.handle(session, msg(text, ref=5), ui)
    assert reply is not None and reply.text == expected
    assert ui.asked == []
    assert not store_path(session.workspace).exists()
    assert script.seen == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("short", SHORT_BEARER),
        ("Bearer short", SHORT_BEARER),
        ("abcd\nefghijkl", "the bearer token must not contain line breaks"),
    ],
)
async def test_an_unusable_secret_answer_is_refused_and_nothing_is_saved(
    chat: OwnerChat, answer: str, expected: str
) -> None:
    ui = ScriptedUI(answers=[answer])
    assert await chat.command("/mcp_add demo http://127.0.0.1:9/mcp --bearer", ui) == expected
    assert len(ui.asked) == 1 and ui.asked[0][1] is True
    assert not store_path((await chat.session()).workspace).exists()


@pytest.mark.anyio
async def test_no_answer_to_the_secret_question_saves_nothing(chat: OwnerChat) -> None:
    ui = ScriptedUI(answers=[])
    reply = await chat.command("/mcp_add demo http://127.0.0.1:9/mcp --header X-Key", ui)
    assert reply == "No answer came, so nothing was saved."
    assert ui.asked == [
        (
            "Send the value of the X-Key header for demo. It stays out of the conversation, "
            "and I delete your message.",
            True,
        )
    ]
    assert not store_path((await chat.session()).workspace).exists()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        ("--bearer", "That is not a token (it has spaces)"),
        ("--header X-Key", "That is not a header value (it reads like a sentence)"),
        ("--oauth --client-id playa --client-secret", "That is not a client secret (it has spaces)"),
    ],
)
async def test_a_sentence_sent_as_a_secret_answer_is_refused_and_nothing_is_saved(
    chat: OwnerChat, flags: str, refusal: str
) -> None:
    ui = ScriptedUI(answers=["sorry, which server did you mean again"])
    reply = await chat.command(f"/mcp_add demo http://127.0.0.1:9/mcp {flags}", ui)
    assert reply == f"{refusal}, so nothing was saved. Try /mcp_add again."
    session = await chat.session()
    assert not store_path(session.workspace).exists()
    assert chat.host.history(session).messages == []


@pytest.mark.anyio
async def test_a_header_value_with_its_scheme_is_one_answer(chat: OwnerChat, host_secret: HostSecret) -> None:
    async with closed_port() as url:
        ui = ScriptedUI(answers=["Token abcdefgh-12345"])
        reply = await chat.command(f"/mcp_add demo {url} --header X-Key", ui)
        assert reply.startswith("Added demo"), reply
        [entry] = saved_entries(await chat.session(), host_secret)
        assert dict(entry.headers) == {"X-Key": "Token abcdefgh-12345"}


@pytest.mark.anyio
async def test_a_bearer_answer_given_with_its_scheme_is_stored_once(
    chat: OwnerChat, host_secret: HostSecret
) -> None:
    async with closed_port() as url:
        ui = ScriptedUI(answers=["Bearer abcdefgh-12345"])
        reply = await chat.command(f"/mcp_add demo {url} --bearer", ui)
    assert reply.startswith("Added demo, but it is unavailable: connection refused")
    [entry] = saved_entries(await chat.session(), host_secret)
    assert entry.name == "demo"
    assert dict(entry.headers) == {"Authorization": "Bearer abcdefgh-12345"}
    assert entry.auth_kind == "bearer"


@pytest.mark.parametrize(
    "args",
    [
        "\\ --bearer=0000000000000000",
        '"--bearer abcdefgh12" demo http://x',
        "demo http://x 'a --header K: vvvvvvvv'",
    ],
)
def test_a_flag_hidden_inside_another_word_still_counts_as_a_secret(args: str) -> None:
    assert carries_secret(args)


KEY = "Zq7Xw3KpL9mN2bV4cX8dR1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            f'demo http://x --header "X-Api-Key {KEY}"',
            'the --header at word 3 looks like a key, not a header name: give "Name: value", '
            "or a name alone to be asked for its value",
        ),
        (
            'demo http://x --header "X-Api-Key value"',
            'the --header at word 3 is neither "Name: value" nor a header name (a colon may be missing)',
        ),
        (
            f"demo http://x --tools a --header {KEY}",
            'the --header at word 5 looks like a key, not a header name: give "Name: value", '
            "or a name alone to be asked for its value",
        ),
        (
            f"demo http://x --header={KEY}",
            'the --header at word 3 looks like a key, not a header name: give "Name: value", '
            "or a name alone to be asked for its value",
        ),
        (
            f'demo http://x --header "{KEY} and more: value12345"',
            'the --header at word 3 looks like a key, not a header name: give "Name: value", '
            "or a name alone to be asked for its value",
        ),
        (
            f'demo http://x --header "{KEY}: value12345"',
            'the --header at word 3 looks like a key, not a header name: give "Name: value", '
            "or a name alone to be asked for its value",
        ),
        (
            'demo http://x --header "X Api: value12345"',
            "the --header at word 3 has no valid header name (letters, digits and -, no spaces)",
        ),
    ],
)
def test_a_malformed_header_is_refused_by_flag_and_position_never_quoting_it(args: str, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_add(args)
    assert str(raised.value) == message
    assert KEY not in str(raised.value) and KEY not in repr(raised.value)
    assert carries_secret(args)


def test_a_key_shaped_unknown_option_is_not_quoted() -> None:
    with pytest.raises(UsageError) as raised:
        parse_add("demo http://x --ghp_abcdefghijklmnop")
    assert "ghp_" not in str(raised.value)
    assert "at word 3" in str(raised.value)


@pytest.mark.parametrize(
    "header",
    ["Authorization: Bearer Zq7Xw3K", "Authorization: Basic 1234567", "X-Key: Token Zq7Xw3K"],
)
def test_the_secret_floor_applies_to_the_credential_after_an_auth_scheme(header: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_add(f'demo http://x --header "{header}"')
    assert str(raised.value).startswith("the credential after the scheme in the value of ")
    assert "shorter than 8 characters" in str(raised.value)
    assert header.rsplit(" ", 1)[1] not in str(raised.value)


@pytest.mark.anyio
async def test_a_secret_answer_with_a_short_credential_after_its_scheme_is_refused(chat: OwnerChat) -> None:
    ui = ScriptedUI(answers=["Bearer Zq7Xw3K"])
    reply = await chat.command("/mcp_add demo http://127.0.0.1:9/mcp --header Authorization", ui)
    assert "the credential after the scheme" in reply and "Zq7Xw3K" not in reply
    assert not store_path((await chat.session()).workspace).exists()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answers", [[], ["sorry, which server did you mean again"]], ids=["timed out", "refused"]
)
async def test_a_key_sent_after_the_secret_question_ended_is_deleted_and_never_reaches_the_model(
    chat: OwnerChat, answers: list[str]
) -> None:
    key = "Zq7Xw3KpL9vR2mN8bT4yF6hJ0cD5eG1a"
    ui = ScriptedUI(answers=list(answers))
    ended = await chat.say("/mcp_add demo http://127.0.0.1:9/mcp --bearer", ui, ref=1)
    assert "nothing was saved" in ended.text
    # The owner, late, sends the key anyway: it is not an answer to anything now.
    reply = await chat.say(key, ui, ref=2)
    assert reply.kind == "command"
    assert reply.text.startswith("That message looks like a key, so it was not sent to the agent")
    assert 2 in ui.deleted
    session = await chat.session()
    assert chat.host.history(session).messages == []
    assert not store_path(session.workspace).exists()


@pytest.mark.anyio
async def test_a_key_sent_while_a_turn_runs_is_deleted_at_once_and_never_reaches_the_model(
    data_dir: Path, host_secret: HostSecret
) -> None:
    key = "Zq7Xw3KpL9vR2mN8bT4yF6hJ0cD5eG1a"
    started, release = anyio.Event(), anyio.Event()
    seen: list[str] = []

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(repr(messages))
        started.set()
        await release.wait()
        return ModelResponse(parts=[TextPart("done")])

    with anyio.fail_after(30):
        async with (
            remote_host(data_dir, host_secret, FunctionModel(slow)) as host,
            anyio.create_task_group() as tg,
        ):
            session = await host.session("console:t", owner="owner")
            ui = ScriptedUI()
            tg.start_soon(host.handle, session, msg("a long question", ref=1), ui)
            await started.wait()
            # The chat is busy: the key is not queued behind the turn, it is handled at once.
            reply = await host.handle(session, msg(key, ref=2), ui)
            assert reply is not None and reply.text.startswith("That message looks like a key")
            assert ui.deleted == [2]
            release.set()
    assert all(key not in text for text in seen)
    assert key not in repr(host.history(session).messages)


GHP = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Y"
# A 32-digit hex key whose entropy (3.41 bits) is under the entropy floor, shaped like a server name.
LOW_HEX = "a0b1a2b3a4b5a6b7a8b9a0b1c2c3c4c5"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            f"demo http://x --tools echo,{GHP}",
            "tool 2 of the --tools at word 3 looks like a key (not repeated here), so nothing was saved; "
            "give the tool's name, and a key only with --bearer or --header",
        ),
        (
            f"demo http://x --tools={LOW_HEX}",
            "tool 1 of the --tools at word 3 looks like a key (not repeated here), so nothing was saved; "
            "give the tool's name, and a key only with --bearer or --header",
        ),
        (
            f"{LOW_HEX} http://x",
            "the name looks like a key (not repeated here), so nothing was saved; "
            "give a plain name such as docs, and a key only with --bearer or --header",
        ),
        (
            f'demo http://x --header "{GHP}: value12345"',
            'the --header at word 3 looks like a key, not a header name: give "Name: value", '
            "or a name alone to be asked for its value",
        ),
    ],
)
def test_a_key_shaped_value_of_any_flag_is_refused_without_quoting_it(args: str, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_add(args)
    assert str(raised.value) == message
    for key in (GHP, LOW_HEX):
        assert key not in str(raised.value) and key not in repr(raised.value)
    assert carries_secret(args)


@pytest.mark.parametrize(
    "tools", ["hf_doc_search,npm_search", "secret_manager_read", "getRepositoryContents,list_issues"]
)
def test_tool_names_that_start_like_keys_are_still_tool_names(tools: str) -> None:
    assert parse_add(f"demo http://x --tools {tools}").tools == tuple(tools.split(","))


@pytest.mark.parametrize("name", ["github-enterprise-2024", "my-company-jira-prod1", "mcp-server-2025-06-18"])
def test_a_name_of_short_words_and_digits_is_a_name(name: str) -> None:
    request = parse_add(
        f'{name} http://x --tools search_v2_documents_2024 --header "X-Goog-Api-Client-Version-2: v1234567"'
    )
    assert request.name == name and request.tools == ("search_v2_documents_2024",)
    assert list(request.headers) == ["X-Goog-Api-Client-Version-2"]


@pytest.mark.anyio
async def test_a_key_given_as_a_tool_is_never_saved_listed_or_left_in_the_chat(chat: OwnerChat) -> None:
    ui = ScriptedUI()
    added = await chat.command(f"/mcp_add demo http://127.0.0.1:9/mcp --tools {GHP}", ui, ref=1)
    listed = await chat.command("/mcp_list", ui)
    assert "looks like a key" in added
    assert GHP not in added + listed
    assert ui.deleted == [1]
    assert not store_path((await chat.session()).workspace).exists()
