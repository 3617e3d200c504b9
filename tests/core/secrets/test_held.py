"""What is derived from a secret (its forms, its decoders) is kept only while the secret is held:
once the chats that held it let go, nothing of it is left in any cache."""

from __future__ import annotations

import gc
import secrets
from collections.abc import Collection
from pathlib import Path

import pytest

from playa.core import ChatSession, Extension, OutboundSecrets, Redactor, encoded_forms, outbound_secrets
from playa.mcp_remote import HostSecret
from support.chat import ScriptedUI, msg
from support.host import new_host
from support.remote import demo_server, owner_chat


def holders_of(values: set[str], *, besides: tuple[object, ...]) -> list[object]:
    """Every object the collector tracks that holds one of ``values`` (but ``besides``)."""
    gc.collect()
    skip = {id(values), *map(id, besides)}
    found: list[object] = []
    for thing in gc.get_objects():
        if id(thing) in skip:
            continue
        if isinstance(thing, dict):
            items: object = [*thing.keys(), *thing.values()]
        elif isinstance(thing, (tuple, list, set, frozenset)):
            items = thing
        else:
            continue
        try:
            if any(isinstance(item, str) and item in values for item in items):  # type: ignore[attr-defined]
                found.append(thing)
        except RuntimeError:  # another thread changed it meanwhile
            continue
    return found


def test_a_released_secret_and_its_forms_are_in_no_cache() -> None:
    value = "Bearer " + secrets.token_urlsafe(32)
    forms = encoded_forms(value)
    registry = OutboundSecrets()
    first, second = object(), object()
    registry.hold(first, [value])
    registry.hold(second, [value])
    redactor = Redactor([value])
    assert redactor.redact(f"x {value} y") == "x [redacted] y"
    # While held, the registry's tables hold it: the scan below finds what it must.
    assert holders_of(forms, besides=(forms,))
    registry.release(first)
    assert value in registry
    registry.release(second)
    del redactor
    assert value not in registry
    held = holders_of(forms, besides=(forms,))
    assert held == [], [type(thing).__name__ for thing in held]


def test_a_secret_released_together_with_others_is_in_no_cache_once_the_block_ends() -> None:
    values = {f"sk-{secrets.token_hex(20)}" for _ in range(3)}
    registry = OutboundSecrets()
    owners = [object() for _ in values]
    for owner, value in zip(owners, sorted(values), strict=True):
        registry.hold(owner, [value])
    Redactor(values).redact("nothing")
    with registry.releasing_together():
        for owner in owners:
            registry.release(owner)
    forms = {form for value in values for form in encoded_forms(value)}
    held = holders_of(forms, besides=(forms, values))
    assert held == [], [type(thing).__name__ for thing in held]


class Keyed(Extension):
    """Gives every chat the same credential, as one server added to many chats does."""

    def __init__(self, value: str) -> None:
        self.value = frozenset({value})

    def credentials(self, session: ChatSession) -> Collection[str]:
        return self.value


@pytest.mark.anyio
async def test_once_the_chats_that_held_a_credential_are_closed_no_cache_holds_it(tmp_path: Path) -> None:
    value = "sk-" + secrets.token_hex(24)
    forms = encoded_forms(value)
    keyed = Keyed(value)
    async with new_host(tmp_path, extensions=[keyed]) as host:
        for scope in ("console:one", "console:two"):
            session = await host.session(scope, owner="owner")
            reply = await host.handle(session, msg(f"/unknown {value}"), ScriptedUI())
            assert reply is None or value not in reply.text
        del session, reply
        assert value in outbound_secrets()
        assert await host.evict_idle(0) == 2
        assert value not in outbound_secrets()
        # The extension still knows it (the server stays added): that one, and nothing else.
        held = holders_of(forms, besides=(forms, keyed.value))
        assert held == [], [type(thing).__name__ for thing in held]


@pytest.mark.anyio
async def test_once_a_remote_servers_chat_is_closed_no_cache_holds_its_token(
    data_dir: Path, host_secret: HostSecret
) -> None:
    token = "tok-" + secrets.token_hex(24)
    forms = encoded_forms(token) | encoded_forms(f"Bearer {token}")
    async with demo_server(token) as demo, owner_chat(data_dir, host_secret, "console:held") as chat:
        added = await chat.command(f"/mcp_add demo {demo.url} --bearer {token}", ref=1)
        assert "Added demo" in added
        # A failed connect: its error passes the endpoint's redactor.
        refused = await chat.command(
            f"/mcp_add wrong {demo.url.rstrip('/')}/nothing-here --bearer {token}", ref=2
        )
        assert token not in refused
        assert f"Bearer {token}" in outbound_secrets()
        assert await chat.host.evict_idle(0) == 1
        assert f"Bearer {token}" not in outbound_secrets()
        held = holders_of(forms, besides=(forms,))
        assert held == [], [type(thing).__name__ for thing in held]
