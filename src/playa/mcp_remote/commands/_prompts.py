"""The chat's server prompts, for everyone in the chat: ``/prompts`` lists them, ``/prompt`` runs one.

Anyone in the chat may list and run the prompts the owner approved, as anyone may talk to the
agent: running one is the person's own message, with the server's text in it, marked as the
server's. What a run costs the server is a ``prompts/get`` with the person's arguments (and a
``completion/complete`` per argument asked for); each run is recorded in the chat's audit log
with who ran it, never the arguments or the text.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Final

import mcp_types

from ...core import CommandContext, looks_like_credential, one_line
from ...exceptions import RemoteError, ToolError, UsageError
from .._chat import ChatServers
from .._server import RemoteServer
from ._access import ChatAccess, server_named
from ._requests import ServerName

__all__ = ["PROMPTS_USAGE", "PROMPT_USAGE", "list_prompts", "run_prompt"]

PROMPTS_USAGE: Final = "/prompts [server]"
PROMPT_USAGE: Final = '/prompt <server> <name> [argument=value …] (quote a value with spaces: topic="a b")'
_DESCRIPTION_CHARS: Final = 200
_Redact = Callable[[str], str]
_KEY_REFUSED: Final = (
    "That looks like a key: a prompt's arguments go to its server and to the agent, so the prompt was not "
    "run. A prompt never needs your credentials."
)


async def list_prompts(access: ChatAccess, ctx: CommandContext) -> str:
    """``/prompts [server]``: the prompts each server offers that can run, and those that wait."""
    chat = await access.servers(ctx)
    name = ServerName.of(ctx, ctx.args)
    usage = PROMPTS_USAGE
    servers = [server_named(chat, name, usage)] if name.text else sorted(chat.servers.values(), key=_name)
    if not servers:
        return "This chat has no remote MCP servers."
    await chat.wait_for_connects()
    redact = _redactor(ctx, chat)
    blocks = [await _server_prompts(chat, server, redact) for server in servers]
    return "\n\n".join(blocks) + "\n\nRun one with " + PROMPT_USAGE


def _name(server: RemoteServer) -> str:
    return server.entry.name


def _redactor(ctx: CommandContext, chat: ChatServers) -> _Redact:
    """Every credential the chat knows removed: a question is shown before the reply's redaction."""
    return ctx.session.redact or chat.redactor.redact


async def _server_prompts(chat: ChatServers, server: RemoteServer, redact: _Redact) -> str:
    name = server.entry.name
    if server.status == "unavailable" and server.connection is None:
        # Not connected again for a listing: a server in backoff (or waiting for a login) would
        # hold the reply up for a connect; /mcp_list says why it is unavailable.
        return f"{name}: unavailable ({redact(server.reason or 'not connected')})."
    try:
        hold = await chat.prompts.listing(server)
    except (RemoteError, ToolError) as exc:
        reason = exc.reason if isinstance(exc, RemoteError) else str(exc)
        return f"{name}: its prompts cannot be listed now ({redact(reason)})."
    if not hold.live and not hold.held:
        return f"{name}: no prompts."
    lines = [f"{name}:"]
    for prompt in sorted(hold.live.values(), key=lambda p: p.name):
        lines.append(f"- {_shown(prompt.name, redact)}{_arguments(prompt, redact)}{_about(prompt, redact)}")
    for prompt_name in sorted(hold.held):
        lines.append(
            f"- {_shown(prompt_name, redact)} (new or changed: waits for the owner's approval, /mcp_review {name})"
        )
    return "\n".join(lines)


def _shown(text: str, redact: _Redact) -> str:
    shown = redact(one_line(text))
    return shown if len(shown) <= _DESCRIPTION_CHARS else shown[: _DESCRIPTION_CHARS - 1] + "…"


def _arguments(prompt: mcp_types.Prompt, redact: _Redact) -> str:
    words = [
        f"<{_shown(argument.name, redact)}>" if argument.required else f"[{_shown(argument.name, redact)}]"
        for argument in prompt.arguments or ()
    ]
    return " " + " ".join(words) if words else ""


def _about(prompt: mcp_types.Prompt, redact: _Redact) -> str:
    about = prompt.description or prompt.title
    return f" — {_shown(about, redact)}" if about else ""


async def run_prompt(access: ChatAccess, ctx: CommandContext) -> str:
    """``/prompt <server> <name> [argument=value …]``: ask for what is missing, render, and run it as a turn."""
    if ctx.args_hold_key:
        return _KEY_REFUSED
    chat = await access.servers(ctx)
    try:
        words = shlex.split(ctx.args)
    except ValueError as exc:
        raise UsageError(f"{exc}: {PROMPT_USAGE}") from None
    if len(words) < 2:
        raise UsageError(f"usage: {PROMPT_USAGE}")
    server = server_named(chat, ServerName.of(ctx, words[0]), PROMPT_USAGE)
    given = _given(words[2:])
    try:
        prompt = await chat.prompts.runnable(server, words[1])
        if (refusal := await _ask_missing(chat, server, prompt, given, ctx)) is not None:
            return refusal
        rendered = await chat.prompts.render(server, prompt, given)
    except RemoteError as exc:
        _record(chat, ctx, server, words[1], outcome="error")
        return f"The prompt {_shown(words[1], _redactor(ctx, chat))} of {server.entry.name} failed: {exc.explained}"
    except ToolError as exc:
        return str(exc)
    _record(chat, ctx, server, prompt.name, outcome="ok", chars=len(rendered.text), media=len(rendered.media))
    if ctx.turn is None:
        return "No agent answers in this chat, so the prompt was not run."
    return await ctx.turn(rendered.text, rendered.media)


def _given(words: list[str]) -> dict[str, str]:
    given: dict[str, str] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or not key:
            raise UsageError(f"Each argument is argument=value: {PROMPT_USAGE}")
        given[key] = value
    return given


async def _ask_missing(
    chat: ChatServers,
    server: RemoteServer,
    prompt: mcp_types.Prompt,
    given: dict[str, str],
    ctx: CommandContext,
) -> str | None:
    """Check the arguments given, and ask the person for each required one missing; a refusal, or None."""
    known = {argument.name: argument for argument in prompt.arguments or ()}
    redact = _redactor(ctx, chat)
    if unknown := sorted(set(given) - set(known)):
        takes = ", ".join(_shown(name, redact) for name in known) or "none"
        raise UsageError(
            f"The prompt {_shown(prompt.name, redact)} takes no argument {_shown(unknown[0], redact)} "
            f"(it takes: {takes})."
        )
    for name, argument in known.items():
        if name in given or not argument.required:
            continue
        suggestions = await chat.prompts.suggestions(server, prompt.name, name, given)
        about = f" ({_shown(argument.description, redact)})" if argument.description else ""
        offer = f" For example: {', '.join(suggestions)}." if suggestions else ""
        answer = await ctx.ui.ask(
            f"The prompt {_shown(prompt.name, redact)} of {server.entry.name} needs {_shown(name, redact)}"
            f"{about}. Send its value, or /cancel.{offer}"
        )
        if answer is None:
            return "No answer came, so the prompt was not run."
        if looks_like_credential(answer):
            return _KEY_REFUSED
        given[name] = answer.strip()
    return None


def _record(
    chat: ChatServers,
    ctx: CommandContext,
    server: RemoteServer,
    prompt: str,
    *,
    outcome: str,
    chars: int = 0,
    media: int = 0,
) -> None:
    chat.audit.record(
        "prompt_run",
        sender=ctx.sender.id,
        server=server.entry.name,
        prompt=prompt,
        outcome=outcome,
        chars=chars,
        media=media,
    )
