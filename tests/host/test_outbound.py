"""The outbound gate: every log record of every logger is redacted before any handler sees it."""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Iterator

import pytest

from playa.host import encoded_forms, install_outbound_gate, outbound_secrets

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


def leaks(text: str) -> list[str]:
    pieces = {SECRET[i : i + 12] for i in range(len(SECRET) - 11)}
    return sorted(form for form in encoded_forms(SECRET) | pieces if form in text)


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
    assert leaks(output) == []


def test_a_shortened_credential_is_a_leak_too_and_is_removed(stream: io.StringIO) -> None:
    shortened = f"input_value='{{not json, Bearer {SECRET[:6]}...{SECRET[-20:]}'"
    logging.getLogger("pydantic.like").warning("Invalid JSON: %s", shortened)
    assert leaks(stream.getvalue()) == []


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
