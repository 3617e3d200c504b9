"""Which servers the chat has: ``/mcp_add``, ``/mcp_remove``, ``/mcp_restore``, ``/mcp_list`` and
``/mcp_tools``."""

from __future__ import annotations

from dataclasses import replace

from ...core import CommandContext
from ...exceptions import StoreError, UsageError, ValidationError
from ...mcp import is_server_name
from .._chat import ChatServers
from ..store import ServerEntry
from ._access import ChatAccess, words_privately
from ._add_request import AddRequest, parse_add
from ._asking import ask_secrets
from ._auth import login
from ._replies import added_text, no_such_server, notice, server_list, server_words, tool_list, with_notes
from ._requests import ServerName

__all__ = ["add", "list_servers", "list_tools", "remove", "restore"]


async def add(access: ChatAccess, ctx: CommandContext) -> str:
    """``/mcp_add``: parse, ask for what was left out, save the entry, and say what it reached."""
    chat = await access.servers(ctx)
    request = parse_add(ctx.args)
    # The host's egress policy, before any secret is asked for or anything is saved.
    if refusal := chat.url_refusal(request.url):
        raise ValidationError("url", f"This host will not connect to that URL: {refusal}.")
    if (refusal := await ask_secrets(request, ctx.ui)) is not None:
        return refusal
    entry = _replacing(chat, request)
    try:
        saved, state = await chat.add(entry)
    except StoreError as exc:
        return f"Could not save {entry.name}: {exc}"
    verb = "Replaced" if saved.changed else "Added"
    connected = len(state.tools) if state.status == "connected" else None
    await ctx.ui.notify(notice(verb.lower(), entry.name, connected))
    if state.needs_login and entry.auth_kind == "none":
        # It answered 401 with OAuth metadata: it wants a login, not headers.
        try:
            saved, state = await chat.add_for_login(entry)
        except StoreError as exc:
            return f"Could not save {entry.name}: {exc}"
    if state.needs_login:
        _, started = await login(ctx, chat, entry.name)
        return with_notes(f"{verb} {entry.name}: this server needs a login. {started}", saved)
    group = ctx.session.group
    text = added_text(verb, entry.name, state, access.clock(), words=not group)
    if group and state.detail:
        text += await words_privately(ctx, f"{entry.name}: the server said: {state.detail}")
    return with_notes(text, saved)


def _replacing(chat: ChatServers, request: AddRequest) -> ServerEntry:
    """The entry ``request`` saves, with what it keeps of the server of that name it replaces."""
    entry = request.entry()
    previous = chat.servers.get(entry.name)
    if previous is None:
        return entry
    if (previous.entry.url, previous.entry.tools) == (entry.url, entry.tools):
        # The same server added again (to retry it, or to change its key) keeps its pins: a
        # re-add must not approve, unseen, a change that waits for the owner.
        entry = replace(entry, pins=previous.entry.pins)
    # A replacement keeps the owner's policies (a re-add never loosens one); --policy sets the
    # server's own.
    kept = previous.entry.policy
    return replace(entry, policy=kept.setting(None, request.policy) if request.policy else kept)


async def remove(access: ChatAccess, ctx: CommandContext) -> str:
    chat = await access.servers(ctx)
    name = ServerName.of(ctx, ctx.args)
    if not name.text:
        raise UsageError("usage: /mcp_remove <name>")
    if not is_server_name(name.text) and name.text not in {r.name for r in chat.rejected}:
        return no_such_server(name)
    try:
        saved, tools, revoked = await chat.remove(name.text)
    except StoreError as exc:
        return f"Could not remove {name.shown}: {exc}"
    if not saved.changed:
        return with_notes(no_such_server(name), saved)
    if tools is not None:  # an entry that failed verification never gave the chat a tool
        await ctx.ui.notify(notice("removed", name.text, tools))
    text = f"Removed {name.shown}" + (f"; its {tools} tools are gone." if tools else ".")
    return with_notes(f"{text} {revoked.text}" if revoked.text else text, saved)


async def restore(access: ChatAccess, ctx: CommandContext) -> str:
    chat = await access.servers(ctx)
    try:
        saved = await chat.restore()
    except StoreError as exc:
        return f"Nothing was restored: {exc}."
    if not saved.changed:
        return "servers.json is already the copy Playa saved last; nothing to restore."
    count = len(chat.servers)
    return with_notes(
        f"Put back the copy of servers.json Playa saved last: {count} server{'' if count == 1 else 's'}.",
        saved,
    )


async def list_servers(access: ChatAccess, ctx: CommandContext) -> str:
    chat = await access.servers(ctx)
    if not ctx.session.group:
        return server_list(chat, access.clock())
    # A group reads the reply: what the servers said goes to the owner alone.
    text = server_list(chat, access.clock(), words=False)
    if (words := server_words(chat)) is not None:
        text += await words_privately(ctx, words)
    return text


async def list_tools(access: ChatAccess, ctx: CommandContext) -> str:
    chat = await access.servers(ctx)
    name = ServerName.of(ctx, ctx.args)
    if name.text and name.text not in chat.servers:
        return no_such_server(name)
    return tool_list(chat, name.text or None, access.clock())
