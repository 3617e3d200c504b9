"""Runs of base64 and hex are decoded and searched for the chat's secrets.

A run of base64 (standard or URL-safe) cut by line breaks of any width, any number of them, LF
or CRLF, raw or escaped as JSON and a ``repr`` write them (once or twice), and a run of hex (either
case, with ``:``, space, ``-`` or no separator) that holds a secret is redacted whole, but for a
first or last line that holds no part of it.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
import string
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver import Context, MCPServer

from playa.core.secrets import REDACTED, Redactor, _blocks, _decode
from playa.mcp_remote import HostSecret, resolve_host_secret
from servers.header_echo import dump, header, mime
from servers.python_servers import serve_mcp
from support.chat import RecordingModel, ScriptedUI, msg
from support.leaks import leaks
from support.remote import remote_host

ALPHABET = string.ascii_letters + string.digits + "-._~+/"
KEY64 = "".join(random.Random(64).choices(ALPHABET, k=64))
KEY200 = "".join(random.Random(200).choices(ALPHABET, k=200))
WIDTHS = [64, 76, 3, 4, 5, 7, 13, 19, 31, 33, 57, 63, 65, 77, 100]
NEWLINES = ("\n", "\r\n")
ENCODERS = (base64.b64encode, base64.urlsafe_b64encode)
"""Base64's two alphabets: standard and URL-safe."""


# Every test runs with each search (see conftest), unless it asks for one.
pytestmark = pytest.mark.usefixtures("search")


def cores(value: str) -> list[str]:
    """The standard base64 of ``value`` at each of the three byte alignments inside a larger blob."""
    data = value.encode()
    return [
        base64.b64encode(bytes(pad) + data).decode()[-(-8 * pad // 6) : 8 * (pad + len(data)) // 6]
        for pad in range(3)
    ]


def wrap(encoded: str, width: int, newline: str) -> list[str]:
    return [encoded[at : at + width] for at in range(0, len(encoded), width)]


def assert_run_redacted(out: str, before: str, lines: list[str], newline: str, after: str, key: str) -> None:
    """``out`` is ``before``, then the blob's lines redacted as one but for a first or last line
    left as it was, then ``after``; or, where one line shows the key's base64 unbroken, that
    line's literal match."""
    assert out.startswith(before) and out.endswith(after), out
    urlsafe = [core.replace("+", "-").replace("/", "_") for core in cores(key)]
    if any(core in line for line in lines for core in cores(key) + urlsafe):
        return
    middle = out[len(before) : len(out) - len(after)]
    assert middle.count(REDACTED) == 1, middle
    head, tail = middle.split(REDACTED)
    assert head in ("", lines[0] + newline), head
    assert tail in ("", newline + lines[-1]), tail


@pytest.mark.parametrize("key", [KEY64, KEY200], ids=["64", "200"])
def test_a_long_key_wrapped_at_any_width_in_a_larger_blob_is_redacted(key: str) -> None:
    # The header as a server may echo it, base64-encoded (either alphabet) inside a larger blob
    # and wrapped (LF or CRLF): MIME's 76 columns, PEM's 64, odd widths and widths so narrow that
    # every line holds a break.
    redactor = Redactor([f"Bearer {key}"])
    for newline, encode, width, before in itertools.product(
        NEWLINES, ENCODERS, WIDTHS, (0, 1, 2, 3, 40, 100)
    ):
        blob = bytes(range(before)) + f"Authorization: Bearer {key}\r\n".encode() + b"\xfe\xfd"
        lines = wrap(encode(blob).decode(), width, newline)
        text = f"echo: {newline.join(lines)}{newline} done"
        out = redactor.redact(text)
        assert leaks(key, out) == [], (newline, encode, width, before)
        assert_run_redacted(out, "echo: ", lines, newline, f"{newline} done", key)
        assert redactor.contains(text)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_any_number_of_breaks_at_any_places_is_redacted(newline: str) -> None:
    # Lines of irregular widths, as a tool that re-wraps text might leave them.
    redactor = Redactor([KEY64])
    rng = random.Random(5)
    for _ in range(200):
        encoded = base64.b64encode(
            rng.randbytes(rng.randint(0, 50)) + KEY64.encode() + rng.randbytes(3)
        ).decode()
        lines, at = [], 0
        while at < len(encoded):
            width = rng.randint(3, 90)
            lines.append(encoded[at : at + width])
            at += width
        text = "a " + newline.join(lines) + " b"
        out = redactor.redact(text)
        assert leaks(KEY64, out) == [], lines
        assert_run_redacted(out, "a ", lines, newline, " b", KEY64)


def test_a_run_is_redacted_whole_when_the_key_spans_every_line() -> None:
    # Nothing of the header but the key: every line holds a part of it.
    redactor = Redactor([f"Bearer {KEY64}"])
    encoded = base64.encodebytes(KEY64.encode()).decode()  # MIME: 76 columns and a final break
    assert redactor.redact(f"data:\n{encoded}end") == f"data:\n{REDACTED}\nend"
    encoded = base64.b64encode(KEY200.encode()).decode()
    pem = "\r\n".join(wrap(encoded, 64, ""))
    assert Redactor([KEY200]).redact(f"-----BEGIN KEY-----\r\n{pem}\r\n-----END KEY-----") == (
        f"-----BEGIN KEY-----\r\n{REDACTED}\r\n-----END KEY-----"
    )


def test_a_line_that_holds_no_part_of_the_key_stays() -> None:
    # A label on the line before a blob and a word on the line after join its run of base64
    # characters; they hold nothing of the key, so they stay.
    redactor = Redactor([KEY64])
    lines = wrap(base64.b64encode(KEY64.encode()).decode(), 40, "")
    text = "Attachment\n" + "\n".join(lines) + "\nEnd of message"
    assert redactor.redact(text) == f"Attachment\n{REDACTED}\nEnd of message"


def test_base64_without_a_break_keeps_its_exact_literal_match() -> None:
    # A blob that shows the key's base64 unbroken is matched by the literal forms, exactly as before.
    redactor = Redactor([KEY64])
    encoded = base64.b64encode(b"\x00" + KEY64.encode() + b"\x01").decode()
    out = redactor.redact(f"x {encoded} y")
    assert out.startswith("x ") and out.endswith(" y") and REDACTED in out
    assert leaks(KEY64, out) == []
    assert len(out) > len(f"x {REDACTED} y")  # the characters that mix in the neighbours' bits stay


def test_a_break_in_the_base64_of_the_auth_scheme_alone_leaves_the_scheme() -> None:
    # Only "Bearer " is cut: the credential's base64 shows unbroken and is matched as it is.
    redactor = Redactor([f"Bearer {KEY64}"])
    encoded = base64.b64encode(f"Bearer {KEY64}".encode()).decode()
    out = redactor.redact(f"x {encoded[:4]}\n{encoded[4:]} y")
    assert out.startswith(f"x {encoded[:4]}\n") and leaks(KEY64, out) == []


ESCAPES: dict[str, Callable[[str], str]] = {
    "json": lambda text: json.dumps(text)[1:-1],
    "json, '/' escaped": lambda text: json.dumps(text)[1:-1].replace("/", "\\/"),
    "repr": lambda text: repr(text)[1:-1],
    "repr of json": lambda text: repr(json.dumps(text))[2:-2],
    "json of json": lambda text: json.dumps(json.dumps(text))[3:-3],
}
"""How a text shows a string it quotes: its line breaks as escapes, once or twice."""


@pytest.mark.parametrize("escape", ESCAPES.values(), ids=ESCAPES.keys())
@pytest.mark.parametrize("key", [KEY64, KEY200], ids=["64", "200"])
def test_a_wrapped_key_whose_line_breaks_are_escaped_is_redacted(
    escape: Callable[[str], str], key: str
) -> None:
    # A tool's JSON result (or a repr, or the repr of a JSON body) that quotes the header in
    # wrapped base64 (either alphabet, LF or CRLF): its line breaks are escapes there, two or
    # four characters, or more.
    redactor = Redactor([f"Bearer {key}"])
    for newline, encode, width, before in itertools.product(NEWLINES, ENCODERS, WIDTHS, (0, 1, 2, 3, 40)):
        blob = bytes(range(before)) + f"Authorization: Bearer {key}\r\n".encode()
        lines = wrap(encode(blob).decode(), width, newline)
        text = 'result: {"data": "' + escape(newline.join(lines) + newline) + '"}'
        out = redactor.redact(text)
        assert leaks(key, out) == [], (newline, encode, width, before)
        shown = [escape(line) for line in lines]
        assert_run_redacted(out, 'result: {"data": "', shown, escape(newline), escape(newline) + '"}', key)
        assert redactor.contains(text)


@pytest.mark.parametrize("escape", ESCAPES.values(), ids=ESCAPES.keys())
def test_the_mime_base64_of_the_header_in_a_json_result_is_redacted(escape: Callable[[str], str]) -> None:
    # The header as a tool quotes it: MIME's 76 columns and a final break, inside a JSON string.
    key = "".join(random.Random(1).choices(string.ascii_letters + string.digits, k=64))
    redactor = Redactor([f"Bearer {key}"])
    for pad in range(3):
        mime = base64.encodebytes(
            bytes(range(1, pad + 1)) + f"Authorization: Bearer {key}\r\n".encode()
        ).decode()
        for text in ("result: " + json.dumps(mime), f'result: "{escape(mime)}"'):
            out = redactor.redact(text)
            assert leaks(key, out) == [], (pad, text)
            assert out.startswith('result: "[redacted]') and out.endswith('"'), out


@pytest.mark.parametrize("newline", ["\\n", "\\r\\n", "\\\\n"])
def test_escaped_breaks_between_base64_and_a_label_keep_the_label(newline: str) -> None:
    # A label and a word joined to the blob by escaped breaks: the n or r of the escape is a base64
    # character, so they join its run; they hold nothing of the key, and stay as they were.
    redactor = Redactor([KEY64])
    lines = wrap(base64.b64encode(KEY64.encode()).decode(), 40, "")
    text = "Attachment" + newline + newline.join(lines) + newline + "End"
    assert redactor.redact(text) == f"Attachment{newline}{REDACTED}{newline}End"


def test_an_escaped_slash_in_an_unbroken_blob_is_read_as_a_slash() -> None:
    # JSON that escapes '/' (PHP, some Java encoders): the literal forms do not show the key there,
    # at any alignment. (ASCII never encodes to '/'; 'ÿ' does, at each of the three.)
    key = KEY64[:20] + "ÿÿÿ" + KEY64[20:40]
    redactor = Redactor([key])
    for pad in range(3):
        encoded = base64.b64encode(bytes(pad) + key.encode()).decode()
        assert all("/" in core for core in cores(key))
        text = '{"blob": "' + encoded.replace("/", "\\/") + '"}'
        out = redactor.redact(text)
        assert out.startswith('{"blob": "') and out.endswith('"}') and REDACTED in out, out
        assert leaks(key, out) == [], pad
        assert redactor.contains(text)


CASES = (str.lower, str.upper)
SEPARATORS = ("", ":", " ", "-")
HEX_CASES = list(itertools.product(CASES, SEPARATORS))
"""How hex is written: either case, its bytes joined by nothing or one of the separators."""


def hex_of(data: bytes, case: object, separator: str) -> str:
    assert callable(case)
    digits: str = case(data.hex())
    return separator.join(digits[at : at + 2] for at in range(0, len(digits), 2))


@pytest.mark.parametrize("separator", SEPARATORS)
def test_hex_of_a_key_in_a_larger_hex_run_is_redacted_whole(separator: str) -> None:
    # Either case, a key of either length, at any alignment, alone or with its scheme and header.
    for case, key in itertools.product(CASES, (KEY64, KEY200)):
        redactor = Redactor([f"Bearer {key}"])
        for before in range(0, 9):
            for value in (key, f"Bearer {key}", f"Authorization: Bearer {key}"):
                blob = bytes(range(200, 200 + before)) + value.encode() + b"\x00\xff"
                text = f"dump: {hex_of(blob, case, separator)} (end)"
                out = redactor.redact(text)
                assert out == f"dump: {REDACTED} (end)", (case, len(key), before, value)
                assert redactor.contains(text)


def test_hex_next_to_a_word_keeps_the_word() -> None:
    # "value" ends in a hex digit: the run starts inside the word, and the word is given back.
    redactor = Redactor([KEY64])
    for case, separator in HEX_CASES:
        digits = hex_of(KEY64.encode(), case, separator)
        text = f"value {digits} because"
        assert redactor.redact(text) == f"value {REDACTED} because", (case, separator)


@pytest.mark.parametrize("search", ["direct"], indirect=True)
@pytest.mark.parametrize("escape", ESCAPES.values(), ids=ESCAPES.keys())
def test_a_hex_dump_whose_lines_are_joined_by_escaped_breaks_is_redacted(
    escape: Callable[[str], str],
) -> None:
    # A dump's lines cut the key's hex (either case, any separator). Only the direct search decodes
    # every run of hex; the block filter decodes a run where one line holds the key's hex whole
    # (see the module's limits).
    redactor = Redactor([f"Bearer {KEY64}"])
    for (case, separator), width in itertools.product(HEX_CASES, (32, 47, 48, 64)):
        digits = hex_of(f"Authorization: Bearer {KEY64}\r\n".encode(), case, separator)
        lines = wrap(digits, width, "")
        text = 'dump: "' + escape("\n".join(lines) + "\n") + '"'
        out = redactor.redact(text)
        assert leaks(KEY64, out) == [], (case, separator, width)
        assert out.startswith('dump: "') and REDACTED in out, out


def test_a_short_secret_has_hex_but_its_base64_is_not_decoded() -> None:
    # Ten bytes make twenty hex digits, the least that is decoded; base64 needs sixteen bytes.
    secret = "k3y-value!"
    assert {decoder.whole for decoder in _decode._decoders(secret)} == {True}
    assert Redactor([secret]).redact(f"x {secret.encode().hex()} y") == f"x {REDACTED} y"
    assert {decoder.whole for decoder in _decode._decoders("x" * 16)} == {False, True}


@pytest.mark.parametrize("fill", [".", "é"])
def test_a_wrapped_long_key_across_the_edge_of_two_scanned_chunks_is_redacted(fill: str) -> None:
    # Non-ASCII text is scanned a chunk at a time (and any text for `contains`).
    redactor = Redactor([KEY200])
    lines = wrap(base64.b64encode(KEY200.encode()).decode(), 7, "")
    wrapped = "\r\n".join(lines)
    edge = _blocks._CHUNK
    for shift in range(-len(wrapped), 1, 5):
        text = fill * (edge + shift) + wrapped + " tail"
        out = redactor.redact(text)
        assert leaks(KEY200, out) == [], shift
        assert out.startswith(fill * (edge + shift)) and out.endswith(" tail"), shift
        assert redactor.contains(text)


@pytest.mark.parametrize("search", ["filter"], indirect=True)
def test_ten_megabytes_of_hex_and_numbers_cost_few_decodings(monkeypatch: pytest.MonkeyPatch) -> None:
    # A hex dump and long numbers: the blocks of a key's hex are met by chance, and each chance
    # meeting costs a comparison, not a decoding of the run.
    calls = [0]
    run_at = _decode._Decoder.run_at

    def counted(self: _decode._Decoder, *args: object) -> tuple[int, int]:
        calls[0] += 1
        return run_at(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_decode._Decoder, "run_at", counted)
    rng = random.Random(9)
    dump = "\n".join(rng.randbytes(30).hex() for _ in range(80_000))
    numbers = " ".join(str(rng.randrange(10**15)) for _ in range(300_000))
    redactor = Redactor([KEY64, f"Bearer {KEY200}"])
    for text in (dump, numbers):
        assert redactor.redact(text) is text
    assert calls[0] == 0


@pytest.mark.parametrize("search", ["filter"], indirect=True)
def test_a_hostile_run_of_a_long_key_costs_a_decoding_per_few_reaches(decodings: list[int]) -> None:
    # A thousand-character key's base64 cut short, repeated with breaks: every sampled block is
    # one of its blocks and fails to confirm. A decoding looks ahead of the block further than
    # behind, so the blocks it has looked past need none: the work stays linear in the text.
    key = "".join(random.Random(1000).choices(ALPHABET, k=1000))
    redactor = Redactor([key])
    core = base64.b64encode(key.encode()).decode()[:-6]
    text = (core + "\n") * (1_000_000 // (len(core) + 1))
    assert redactor.redact(text) is text
    (decoder,) = [decoder for decoder in redactor._decoders if not decoder.whole]
    assert 0 < decodings[0] <= 2 * len(text) // decoder.reach + 10


@pytest.mark.parametrize("search", ["filter"], indirect=True)
def test_json_full_of_escaped_line_breaks_costs_no_more_decodings_than_raw_ones(decodings: list[int]) -> None:
    # A block that holds an escaped CRLF and at most one character of an encoding meets nearly
    # every escaped CRLF: one look serves every value, and only a run that holds some value's
    # blocks costs a decoding of that value. So the lines of a log, prose and unrelated base64,
    # cost about as many decodings joined by escaped CRLFs in JSON as joined by raw ones.
    rng = random.Random(3)
    lines = []
    for number in range(20_000):
        if number % 5 == 0:
            lines += wrap(base64.b64encode(rng.randbytes(rng.randint(20, 200))).decode(), 76, "")
        else:
            lines.append(" ".join(rng.choices(["the", "of", "and", "to", "is", "that"], k=8)))
    log = "\r\n".join(lines) + "\r\n"
    redactor = Redactor(["".join(random.Random(seed).choices(ALPHABET, k=40)) for seed in range(20)])
    counts = []
    for text in (log, json.dumps({"log": log})):
        decodings[0] = 0
        assert redactor.redact(text) is text
        counts.append(decodings[0])
    raw, escaped = counts
    assert escaped <= 2 * raw + 20, counts


key_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="[]"), min_size=16, max_size=80)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    key=key_text,
    before=st.binary(max_size=80),
    after=st.binary(max_size=8),
    urlsafe=st.booleans(),
    # Raw, and escaped once and twice.
    newline=st.sampled_from(["\n", "\r\n", "\\n", "\\r\\n", "\\\\n", "\\\\r\\\\n"]),
    cuts=st.lists(st.integers(min_value=3, max_value=120), max_size=60),
    around=st.sampled_from(["", " ", "x: ", "é ", '"']),
    slashes=st.booleans(),
)
def test_no_base64_of_a_key_survives_any_wrapping(
    key: str,
    before: bytes,
    after: bytes,
    urlsafe: bool,
    newline: str,
    cuts: list[int],
    around: str,
    slashes: bool,
) -> None:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    encoded = encode(before + key.encode() + after).decode()
    lines, at = [], 0
    for width in cuts or [len(encoded)]:
        if at < len(encoded):
            lines.append(encoded[at : at + width])
            at += width
    lines.append(encoded[at:])
    shown = [line.replace("/", "\\/") if slashes else line for line in lines if line]
    text = around + newline.join(shown) + around
    out = Redactor([key]).redact(text)
    assert REDACTED in out
    assert leaks(key, out) == []


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    key=st.text(alphabet=st.characters(codec="utf-8", exclude_characters="[]"), min_size=10, max_size=80),
    before=st.binary(max_size=20),
    after=st.binary(max_size=20),
    case=st.sampled_from([str.lower, str.upper]),
    separator=st.sampled_from(["", ":", " ", "-"]),
    around=st.sampled_from(["", " ", "x: ", "é ", "value "]),
)
def test_no_hex_of_a_key_survives(
    key: str, before: bytes, after: bytes, case: object, separator: str, around: str
) -> None:
    text = around + hex_of(before + key.encode() + after, case, separator) + around
    out = Redactor([key]).redact(text)
    assert REDACTED in out
    assert leaks(key, out) == []


def encoding_server() -> MCPServer:
    """A server whose tools answer with the request's Authorization header, encoded."""
    server = MCPServer("encoder")
    server.add_tool(mime)

    @server.tool()
    def pem(ctx: Context) -> str:
        """The header in URL-safe base64 at 64 columns, with CRLF."""
        encoded = base64.urlsafe_b64encode(b"\x00\x01" + header(ctx)).decode()
        return "-----BEGIN-----\r\n" + "\r\n".join(wrap(encoded, 64, "")) + "\r\n-----END-----"

    server.add_tool(dump)
    return server


def tool_returns(model: RecordingModel) -> list[str]:
    """Every tool result the model was given at every step, as text."""
    return [
        str(part.content)
        for messages, _ in model.seen
        for message in messages
        for part in message.parts
        if part.part_kind == "tool-return"
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("search", ["default"], indirect=True)
async def test_a_server_that_echoes_the_header_encoded_reaches_the_model_redacted(data_dir: Path) -> None:
    # A 64-character key, which a MIME line break always cuts in its base64: before, only keys
    # of 16 to 57 bytes were covered there, and hex not at all.
    key = "".join(random.Random().choices(string.ascii_letters + string.digits, k=64))
    secret = resolve_host_secret({"MCP_ENCRYPTION_SECRET": "x" * 32}, data_dir=data_dir, allow_generate=False)
    assert isinstance(secret, HostSecret)
    model = RecordingModel()
    with anyio.fail_after(60):
        async with (
            serve_mcp(encoding_server(), bearer=key) as server,
            remote_host(data_dir, secret, model) as host,
        ):
            session = await host.session("console:decoded", owner="owner")
            ui = ScriptedUI()
            added = await host.handle(session, msg(f"/mcp_add enc {server.url} --bearer {key}", ref=1), ui)
            assert added is not None and added.text.startswith("Added enc: connected"), added
            for tool in ("enc__mime", "enc__pem", "enc__dump"):
                reply = await host.handle(session, msg(tool), ScriptedUI())
                assert reply is not None and REDACTED in reply.text, reply
    returns = list(dict.fromkeys(tool_returns(model)))  # each step shows the earlier results again
    assert len(returns) == 3, returns
    assert returns[0].startswith(f"header:\n{REDACTED}") and returns[2] == f"hex: {REDACTED}", returns
    for text in returns:
        assert leaks(key, text) == [], text
