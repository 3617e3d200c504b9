"""A reply streamed as the model writes it: every version shown passes the reply's gate, and the
head of a key split across the provider's pieces never shows, whatever the position of the split.

The model is pydantic-ai's real provider client against the loopback provider, which streams
server-sent events; what the live reply was given is the oracle for what a person could see.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

from playa.agent import ModelLimits, ReplyStream
from playa.core import REDACTED, EnvPolicy, Redactor
from support.chat import ScriptedUI, msg
from support.host import new_host
from support.provider_wire import pieces
from support.providers import PROTOCOLS, Protocol, hang, serve_provider, tool_call

pytestmark = pytest.mark.anyio

KEY = "sk-live-8f3KqZ2xW9vT4mNcR7pL0aYe"
ENV = {"OPENAI_API_KEY": KEY}
BEFORE = "Your key is "
AFTER = ", keep it safe."


@dataclass
class Shown:
    """A live reply that keeps every version it was given, as a front end that showed them all."""

    versions: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    running: list[list[str]] = field(default_factory=list)

    def changed(self, stream: ReplyStream) -> None:
        self.versions.append(stream.text())
        self.steps.append(stream.step)
        self.running.append(sorted(stream.running.values()))


def _stream_of(redactor: Redactor, live: Shown) -> ReplyStream:
    return ReplyStream(lambda: redactor, live)


async def _feed(stream: ReplyStream, parts: list[str]) -> None:
    async def events() -> Any:
        yield PartStartEvent(index=0, part=TextPart(parts[0]))
        for part in parts[1:]:
            yield PartDeltaEvent(index=0, delta=TextPartDelta(part))

    await stream.handle(None, events())  # type: ignore[arg-type]


def _assert_never_shown(versions: list[str], final: str) -> None:
    for version in versions:
        # Each version is the start of the final reply, in which the key is redacted: a version
        # that held any head of the key would not be.
        assert final.startswith(version), (version, final)
        assert KEY[:3] not in version.removeprefix(BEFORE)


@pytest.mark.parametrize("split", range(1, len(KEY)))
async def test_a_key_split_in_two_at_any_position_never_shows(split: int) -> None:
    redactor = Redactor([KEY])
    live = Shown()
    text = BEFORE + KEY + AFTER
    at = len(BEFORE) + split
    await _feed(_stream_of(redactor, live), [text[:at], text[at:]])
    final = redactor.redact(text)
    _assert_never_shown(live.versions, final)
    assert live.versions[-1] == final == f"{BEFORE}{REDACTED}{AFTER}"


async def test_a_key_written_a_character_at_a_time_never_shows() -> None:
    redactor = Redactor([KEY])
    live = Shown()
    text = BEFORE + KEY + AFTER
    await _feed(_stream_of(redactor, live), list(text))
    final = redactor.redact(text)
    _assert_never_shown(live.versions, final)
    assert live.versions[-1] == final
    # Text that cannot start a key is not held: the words before it showed as they came.
    assert BEFORE.rstrip() in live.versions


def _wrapped(encoded: str, width: int = 16) -> str:
    return "\n".join(encoded[at : at + width] for at in range(0, len(encoded), width))


@pytest.mark.parametrize(
    "form",
    [
        pytest.param(lambda k: k, id="plain"),
        pytest.param(lambda k: base64.b64encode(k.encode()).decode(), id="base64"),
        pytest.param(lambda k: quote(k, safe=""), id="percent"),
        pytest.param(lambda k: "Bearer " + k, id="bearer"),
        pytest.param(lambda k: _wrapped(base64.b64encode(k.encode()).decode()), id="base64-wrapped"),
        pytest.param(lambda k: " ".join(f"{byte:02x}" for byte in k.encode()), id="hex-spaced"),
        pytest.param(lambda k: k.encode().hex(), id="hex"),
    ],
)
async def test_no_encoded_form_of_a_key_shows_while_it_is_written(form: Callable[[str], str]) -> None:
    redactor = Redactor([KEY])
    written = form(KEY)
    text = f"Here: {written} done"
    live = Shown()
    await _feed(_stream_of(redactor, live), list(text))
    final = redactor.redact(text)
    assert written not in final
    for version in live.versions:
        assert final.startswith(version), (version, final)


async def test_with_no_secret_every_piece_shows_at_once() -> None:
    live = Shown()
    await _feed(_stream_of(Redactor(), live), ["Hel", "lo ", "world"])
    assert live.versions == ["Hel", "Hello ", "Hello world"]


async def test_a_failing_filter_shows_nothing() -> None:
    def broken() -> Redactor:
        raise RuntimeError("extension down")

    live = Shown()
    await _feed(ReplyStream(broken, live), ["a secret maybe"])
    assert live.versions == [""]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_streamed_reply_through_a_real_provider_client_never_shows_the_key(
    data_dir: Path, protocol: Protocol
) -> None:
    """One delta per character: every split of the key is on the wire, and every version shown."""
    text = BEFORE + KEY + AFTER
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model(protocol), env=EnvPolicy(environ=ENV)) as host,
    ):
        provider.script(pieces(list(text)))
        session = await host.session("console:stream", owner="owner")
        live = Shown()
        with anyio.fail_after(30):
            reply = await host.handle(session, msg("what is my key?"), ScriptedUI(), live=live)
    assert reply is not None and reply.kind == "agent"
    assert reply.text == f"{BEFORE}{REDACTED}{AFTER}"
    assert provider.requests[0].body.get("stream") is True
    assert len(live.versions) >= len(text) - 1
    _assert_never_shown(live.versions, reply.text)
    assert live.versions[-1] == reply.text


async def test_a_turn_with_a_tool_shows_it_running_and_then_the_new_text(data_dir: Path) -> None:
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model("openai-chat")) as host,
    ):
        provider.script(tool_call("list_files", {}), pieces(["All ", "done."]))
        session = await host.session("console:stream", owner="owner")
        live = Shown()
        with anyio.fail_after(30):
            reply = await host.handle(session, msg("list them"), ScriptedUI(), live=live)
    assert reply is not None and reply.text == "All done."
    assert ["list_files"] in live.running
    assert live.versions[-1] == "All done."
    assert live.running[-1] == []


async def test_without_a_live_reply_the_turn_is_not_streamed(data_dir: Path) -> None:
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model("openai-chat")) as host,
    ):
        provider.script(pieces(["one ", "reply"]))
        session = await host.session("console:stream", owner="owner")
        with anyio.fail_after(30):
            reply = await host.handle(session, msg("hi"), ScriptedUI())
    assert reply is not None and reply.text == "one reply"
    assert not provider.requests[0].body.get("stream")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_provider_that_hangs_while_streaming_ends_the_turn_within_the_model_timeout(
    data_dir: Path, protocol: Protocol
) -> None:
    limits = ModelLimits(timeout=0.5, retries=0)
    async with (
        serve_provider() as provider,
        new_host(data_dir, provider.model(protocol), model_limits=limits) as host,
    ):
        provider.script(hang())
        session = await host.session("console:stream", owner="owner")
        with anyio.fail_after(30):
            reply = await host.handle(session, msg("hello?"), ScriptedUI(), live=Shown())
    assert reply is not None and reply.kind == "error"
    assert "did not answer within 0.5 s" in reply.text
