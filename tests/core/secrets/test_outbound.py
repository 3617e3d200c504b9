"""The outbound gate: every log record of every logger is redacted before any handler sees it."""

from __future__ import annotations

import io
import logging
import time
import uuid
from collections.abc import Iterator

import pytest

from playa.core import REDACTED, OutboundSecrets, encoded_forms, install_outbound_gate, outbound_secrets
from playa.core.secrets import PIECE
from playa.core.secrets._outbound import _Pieces
from support.leaks import leaks

SECRET = "Zq7Xw3KpL9vR2mN8-" + uuid.uuid4().hex


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    install_outbound_gate()
    outbound_secrets().add([SECRET])
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def leaked(text: str) -> list[str]:
    return leaks(SECRET, text, pieces=True)


def test_every_logger_message_argument_exception_and_stack_is_redacted(stream: io.StringIO) -> None:
    # A logger made after the gate was installed, at any level, of any library.
    fresh = logging.getLogger(f"some.library.{uuid.uuid4().hex}")
    fresh.debug("header %s", f"Bearer {SECRET}")
    fresh.warning("percent %s", SECRET.replace("-", "%2D"))
    logging.getLogger("httpcore.http11").debug("headers=%r", [(b"x-echo", f"Bearer {SECRET}".encode())])
    try:
        raise ValueError(f"the server said: denied for {SECRET}")
    except ValueError:
        fresh.exception("a call failed")
    fresh.info("where", stack_info=True, extra={"unused": SECRET})
    output = stream.getvalue()
    assert "a call failed" in output and "ValueError: the server said: denied for [redacted]" in output
    assert output.count("[redacted]") >= 4
    assert leaked(output) == []


def test_a_shortened_credential_is_a_leak_too_and_is_removed(stream: io.StringIO) -> None:
    shortened = f"input_value='{{not json, Bearer {SECRET[:6]}...{SECRET[-20:]}'"
    logging.getLogger("pydantic.like").warning("Invalid JSON: %s", shortened)
    assert leaked(stream.getvalue()) == []


def test_raw_chat_traffic_loses_credential_shaped_words(stream: io.StringIO) -> None:
    unknown = "ghp_" + uuid.uuid4().hex
    logging.getLogger("telegram.Bot").debug(
        "update: %s", {"text": f"/mcp_add x https://h --bearer {unknown}"}
    )
    logging.getLogger("elsewhere").debug("an id %s", "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc")
    output = stream.getvalue()
    assert unknown not in output
    assert "9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc" in output  # other loggers keep their ids


def test_installing_twice_keeps_one_gate() -> None:
    install_outbound_gate()
    factory = logging.getLogRecordFactory()
    install_outbound_gate()
    assert logging.getLogRecordFactory() is factory


def test_every_encoded_form_and_every_piece_of_one_is_removed() -> None:
    secrets = OutboundSecrets()
    secrets.add([f"Bearer {SECRET}"])
    for form in sorted(encoded_forms(SECRET)):
        line = f"the server echoed <{form}> back"
        clean = secrets.pieces.redact(line)
        assert clean.startswith("the server echoed <") and clean.endswith("> back")
        # A wrapped form keeps only lines too short to hold a piece.
        left = clean[len("the server echoed <") : -len("> back")].replace(REDACTED, "")
        assert all(len(part) < PIECE for part in left.split()), (form, clean)
    cut = f"shortened: {SECRET[3:15]}... and {SECRET[-13:]}"
    assert secrets.pieces.redact(cut) == f"shortened: {REDACTED}... and {REDACTED}"
    assert secrets.pieces.redact("nothing here, Bearer others") == "nothing here, Bearer others"


def test_percent_escapes_in_any_case_or_a_mix_of_cases_are_removed() -> None:
    secrets = OutboundSecrets()
    secrets.add([SECRET])
    escapes = [f"%{byte:02x}" for byte in SECRET.encode()]
    escaped = "".join(escapes)
    mixed = "".join(escape.upper() if n % 2 else escape for n, escape in enumerate(escapes))
    for form in (escaped, escaped.upper(), mixed):
        assert secrets.pieces.redact(f"GET /cb?code={form}&x=1") == f"GET /cb?code={REDACTED}&x=1"
    # A cut of it, in the other case, too.
    assert secrets.pieces.redact(f"at {escaped.upper()[9:40]} end") == f"at {REDACTED} end"
    # Text around it keeps its own case and escapes.
    assert secrets.pieces.redact("100%AB of %2F paths") == "100%AB of %2F paths"


def test_only_escapes_change_case_when_a_text_is_matched() -> None:
    secrets = OutboundSecrets()
    # A letter in every window: a run of digits would be the same text in capitals.
    value = "lower-case-key-" + "".join(f"{digit}k" for digit in uuid.uuid4().hex)
    secrets.add([value])
    # Its letters in capitals are another text, also beside an escape in capitals.
    upper = value.upper()
    assert secrets.pieces.redact(f"/%2F{upper}") == f"/%2F{upper}"
    # Its every-byte form in capitals, in lower-case text, is the value.
    every_byte = "".join(f"%{byte:02X}" for byte in value.encode())
    assert secrets.pieces.redact(f"x={every_byte} ok") == f"x={REDACTED} ok"
    assert secrets.pieces.redact(f"X={every_byte} OK") == f"X={REDACTED} OK"


def test_a_value_held_by_a_chat_goes_when_the_last_holder_lets_go() -> None:
    secrets = OutboundSecrets()
    chat_a, chat_b = object(), object()
    shared = "Shared-key-" + uuid.uuid4().hex
    own = "Own-key-" + uuid.uuid4().hex
    secrets.hold(chat_a, [shared, own])
    secrets.hold(chat_b, [shared])
    line = f"{shared} {own}"
    assert secrets.pieces.redact(line) == f"{REDACTED} {REDACTED}"
    secrets.release(chat_a)
    assert secrets.pieces.redact(line) == f"{REDACTED} {own}"
    assert own not in secrets and shared in secrets
    secrets.release(chat_b)
    assert secrets.pieces.redact(line) == line
    assert not secrets.pieces
    # A value added for the process's life outlives every holder of it.
    secrets.add([shared])
    secrets.hold(chat_a, [shared])
    secrets.release(chat_a)
    assert secrets.pieces.redact(shared) == REDACTED


def test_holding_a_new_set_lets_go_of_what_is_no_longer_in_it() -> None:
    secrets = OutboundSecrets()
    owner = object()
    first, second = "First-key-" + uuid.uuid4().hex, "Second-key-" + uuid.uuid4().hex
    secrets.hold(owner, [first])
    secrets.hold(owner, [first, second])
    secrets.hold(owner, [second])
    assert first not in secrets and second in secrets
    assert secrets.pieces.redact(f"{first} {second}") == f"{first} {REDACTED}"


def test_a_new_value_costs_its_own_windows_not_a_rebuild() -> None:
    # A bot meets a new chat's key for all its life: the thousandth must cost what the first did.
    secrets = OutboundSecrets()

    def windows_added(value: str) -> int:
        before = len(secrets.pieces._windows)
        secrets.add([value])
        return len(secrets.pieces._windows) - before

    first = windows_added("Bearer " + uuid.uuid4().hex + uuid.uuid4().hex[:10])
    for _ in range(1000):
        secrets.add(["Bearer " + uuid.uuid4().hex + uuid.uuid4().hex[:10]])
    last = windows_added("Bearer " + uuid.uuid4().hex + uuid.uuid4().hex[:10])
    assert 0 < last <= first * 1.1 and first < 1000
    started = time.process_time()
    secrets.add(["Bearer " + uuid.uuid4().hex + uuid.uuid4().hex[:10]])
    assert time.process_time() - started < 0.25  # generous: ~1 ms on an idle machine


def test_a_credential_two_owners_share_stays_covered_until_both_let_go() -> None:
    # "Bearer X" and "X" share every window of X: letting go of one must not uncover the other.
    secrets = OutboundSecrets()
    token = "Shared-key-" + uuid.uuid4().hex
    chat, session = object(), object()
    secrets.hold(chat, [f"Bearer {token}"])
    secrets.hold(session, [token, "Own-key-" + uuid.uuid4().hex])
    secrets.release(chat)
    assert secrets.pieces.redact(f"saw {token[3:20]}") == f"saw {REDACTED}"
    secrets.hold(chat, [f"Bearer {token}"])
    secrets.release(session)
    assert secrets.pieces.redact(f"saw {token[3:20]}") == f"saw {REDACTED}"
    secrets.release(chat)
    assert secrets.pieces.redact(f"saw {token[3:20]}") == f"saw {token[3:20]}"
    assert not secrets.pieces


def test_two_credentials_that_share_a_part_keep_it_covered_until_both_let_go() -> None:
    # JWTs signed alike share their header: letting go of one token must keep the other's head.
    secrets = OutboundSecrets()
    header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    first, second = f"{header}.{uuid.uuid4().hex}", f"{header}.{uuid.uuid4().hex}"
    chat_a, chat_b = object(), object()
    secrets.hold(chat_a, [first])
    secrets.hold(chat_b, [second])
    secrets.release(chat_a)
    assert secrets.pieces.redact(f"saw {header[4:20]}") == f"saw {REDACTED}"
    assert secrets.pieces.redact(f"saw {second[-20:]}") == f"saw {REDACTED}"
    assert secrets.pieces.redact(f"saw {first[-20:]}") == f"saw {first[-20:]}"
    secrets.release(chat_b)
    assert secrets.pieces.redact(f"saw {header[4:20]}") == f"saw {header[4:20]}"
    assert not secrets.pieces and not secrets.pieces._extra


def test_owners_letting_go_together_keep_their_values_covered_until_the_block_ends() -> None:
    secrets = OutboundSecrets()
    owners = [object() for _ in range(5)]
    values = ["Key-" + uuid.uuid4().hex for _ in owners]
    for owner, value in zip(owners, values, strict=True):
        secrets.hold(owner, [value])
    with secrets.releasing_together():
        with secrets.releasing_together():
            for owner in owners[:4]:
                secrets.release(owner)
        # An inner block's end is not the end: a log line still loses what was let go.
        assert secrets.pieces.redact(values[0]) == REDACTED
        secrets.hold(owners[0], [values[0]])  # held again before the block ends: it stays
    assert secrets.pieces.redact(" ".join(values)) == " ".join(
        [REDACTED, values[1], values[2], values[3], REDACTED]
    )
    assert set(secrets.pieces._of) == {values[0], values[4]}


def test_letting_go_of_most_values_at_once_leaves_what_one_by_one_would() -> None:
    # Past half of what is held, the tables are rebuilt from what stays: shared parts included.
    header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    values = [f"{header}.{uuid.uuid4().hex}" for _ in range(6)] + ["Short-" + uuid.uuid4().hex[:4]]
    together, one_by_one = OutboundSecrets(), OutboundSecrets()
    for secrets in (together, one_by_one):
        for value in values:
            secrets.hold(value, [value, f"Bearer {value}"])
    with together.releasing_together():
        for value in values[:5]:
            together.release(value)
    for value in values[:5]:
        one_by_one.release(value)
    for attribute in ("_windows", "_extra", "_short_counts", "_short"):
        assert getattr(together.pieces, attribute) == getattr(one_by_one.pieces, attribute), attribute
    line = f"saw {header[4:20]} and {values[0][-20:]} and {values[5][-20:]} and {values[6]}"
    assert (
        together.pieces.redact(line) == f"saw {REDACTED} and {values[0][-20:]} and {REDACTED} and {REDACTED}"
    )
    with together.releasing_together():
        for value in values[5:]:
            together.release(value)
    assert not together.pieces and not together.pieces._extra and not together.pieces._short_counts


def test_a_finalized_holder_is_let_go_of_at_the_next_call_and_a_value_still_held_is_never_uncovered() -> None:
    removed: list[str] = []

    class Recording(_Pieces):
        def remove(self, value: str) -> None:
            removed.append(value)
            super().remove(value)

    secrets = OutboundSecrets()
    secrets.pieces = Recording()
    gone, stays = "Gone-key-" + uuid.uuid4().hex, "Stays-key-" + uuid.uuid4().hex
    finalized, successor = object(), object()
    secrets.hold(finalized, [gone, stays])
    secrets.release_later(finalized)  # a finalizer's call: it takes no lock, so nothing changes yet
    assert secrets.pieces.redact(f"{gone} {stays}") == f"{REDACTED} {REDACTED}"
    # A new holder of one of its values (a reconnect's grant): that value never leaves the windows.
    secrets.hold(successor, [stays])
    assert removed == [gone]
    assert secrets.pieces.redact(f"{gone} {stays}") == f"{gone} {REDACTED}"
    assert gone not in secrets and stays in secrets
