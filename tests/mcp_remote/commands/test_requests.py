"""The commands' arguments are judged once: what the classifier found decides what a reply quotes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from playa.core import Command, CommandContext, CommandRouter, Sender, classify
from playa.exceptions import UsageError
from playa.mcp_remote import HostSecret
from playa.mcp_remote.commands import build_commands
from playa.mcp_remote.store import Sealer, ServerEntry, ServerStore
from support.chat import ScriptedUI
from support.remote import OwnerChat

pytestmark = pytest.mark.anyio

KEY = "k7x2m9q4w8e3r6t1y5u0"  # a valid server name by shape, and a key by entropy
GHP = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Y"
# A 32-digit hex key whose entropy (3.41 bits) is under the entropy floor, shaped like a server name.
LOW_HEX = "a0b1a2b3a4b5a6b7a8b9a0b1c2c3c4c5"
NO_SUCH = "There is no server named 'demo'. /mcp_list shows them."
LOOKS_LIKE_A_KEY = "That looks like a key, not a server name (not repeated here). /mcp_list shows the names."


def commands(chat: object | None = None) -> dict[str, Command]:
    """The extension's commands, calling ``chat`` (a stand-in with the fields a command reads)."""

    async def open_servers(session: object) -> Any:
        return chat

    return {command.name: command for command in build_commands(open_servers, lambda: 0.0)}


def router() -> CommandRouter:
    return CommandRouter(commands().values())


async def run(command: Command, args: str, *, args_hold_key: bool) -> str:
    """``command``'s handler, as the host runs it (a usage error is its reply), for a sender who
    is not the owner: nothing that waited for the owner is shown first."""
    sender = Sender(id="x", name="X", is_owner=False)
    session: Any = SimpleNamespace()
    ctx = CommandContext(session, sender, args, ScriptedUI(), args_hold_key=args_hold_key)
    try:
        return await command.handler(ctx)
    except UsageError as exc:
        return str(exc)


@pytest.mark.parametrize(
    ("text", "hold_key"),
    [
        ("/mcp_remove demo", False),
        (f"/mcp_remove {KEY}", True),
        (f"/mcp_policy demo {GHP} deny", True),
        ("/mcp_policy demo search deny", False),
        (f"/mcp_approve demo {KEY}", True),
    ],
)
def test_the_classifier_tells_a_command_whether_its_arguments_hold_a_key(text: str, hold_key: bool) -> None:
    inbound = classify(text, router())
    assert inbound.command is not None
    assert inbound.args_hold_key is hold_key
    assert not hold_key or inbound.carries_secret


@pytest.mark.parametrize("name", ["mcp_tools", "mcp_review"])
async def test_a_handler_takes_the_classifiers_word_on_a_key_and_never_asks_again(name: str) -> None:
    chat = SimpleNamespace(servers={})
    command = commands(chat)[name]
    # The same word, judged a key by the classifier or not: the reply follows the verdict it was given.
    assert await run(command, "demo", args_hold_key=True) == LOOKS_LIKE_A_KEY
    assert await run(command, "demo", args_hold_key=False) == NO_SUCH


async def test_among_several_words_only_the_one_that_holds_the_key_is_withheld() -> None:
    chat = SimpleNamespace(servers={})
    policy = commands(chat)["mcp_policy"]
    # The name is no key, but another word is: the name is quoted, the key never.
    reply = await run(policy, f"demo {GHP} deny", args_hold_key=True)
    assert reply == NO_SUCH
    reply = await run(policy, f"{KEY} tool deny", args_hold_key=True)
    assert reply == LOOKS_LIKE_A_KEY


@pytest.mark.parametrize(
    "text",
    [
        f"/mcp_policy demo {GHP} deny",  # no predicate of its own: the classifier's key check serves
        f"/mcp_policy {KEY} deny",
        "/mcp_remove Demo_1",  # not a name: may be anything
        "/mcp_audit 12abc",
        "/mcp_auth demo http://127.0.0.1:1/callback?code=abc&state=def",
    ],
)
def test_arguments_that_may_hold_a_secret_are_deleted(text: str) -> None:
    assert classify(text, router()).carries_secret


@pytest.mark.parametrize(
    "text",
    [
        "/mcp_policy demo search deny",
        "/mcp_policy",
        "/mcp_remove demo",
        "/mcp_tools",
        "/mcp_audit 20",
        "/mcp_auth demo --paste",
        "/mcp_review --help",
    ],
)
def test_plain_arguments_are_not_deleted(text: str) -> None:
    assert not classify(text, router()).carries_secret


def test_every_command_but_the_prompts_is_the_owners_and_each_has_a_usage() -> None:
    for command in commands().values():
        assert command.usage, command.name
        # A server's prompts are run by anyone in the chat, as anyone may talk to the agent.
        assert command.owner_only == (command.name not in ("prompts", "prompt")), command.name
    assert sorted(commands()) == [
        "mcp",
        "mcp_add",
        "mcp_approve",
        "mcp_audit",
        "mcp_auth",
        "mcp_list",
        "mcp_policy",
        "mcp_reject",
        "mcp_remove",
        "mcp_restore",
        "mcp_review",
        "mcp_tools",
        "prompt",
        "prompts",
    ]


# In a real host: the classifier's verdict, the deletion, and the reply


@pytest.mark.parametrize("command", ["/mcp_remove", "/mcp_tools"])
async def test_remove_and_tools_never_quote_a_key_even_a_name_shaped_one(
    chat: OwnerChat, command: str
) -> None:
    ui = ScriptedUI()
    reply = await chat.command(f"{command} {KEY}", ui, ref=7)
    assert KEY not in reply
    assert reply == LOOKS_LIKE_A_KEY
    assert ui.deleted == [7]


async def test_removing_a_server_named_like_a_key_never_quotes_its_name(
    chat: OwnerChat, host_secret: HostSecret
) -> None:
    session = await chat.session()
    store = ServerStore(session.workspace, session.scope, Sealer(host_secret.value))
    store.put(ServerEntry(name=KEY, url="http://127.0.0.1:9/mcp"))
    assert await chat.command(f"/mcp_remove {KEY}") == "Removed that entry."
    assert not store.load().entries


@pytest.mark.parametrize("command", ["/mcp_remove", "/mcp_tools", "/mcp_review", "/mcp_approve", "/mcp_auth"])
async def test_no_command_quotes_a_hex_key_under_the_entropy_floor(chat: OwnerChat, command: str) -> None:
    ui = ScriptedUI()
    reply = await chat.command(f"{command} {LOW_HEX}", ui, ref=3)
    assert LOW_HEX not in reply and "looks like a key" in reply
    assert ui.deleted == [3]
