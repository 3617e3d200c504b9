"""The owner's commands: ``/mcp_add``, ``/mcp_remove``, ``/mcp_list`` and ``/mcp_tools``."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio.to_thread
from mcp.shared.auth import OAuthClientInformationFull

from ..exceptions import StoreError, UsageError, ValidationError
from ..host import Command, CommandContext, looks_like_credential
from ..mcp import is_server_name
from ._chat import ChatServers, ServerState
from ._grant import OAuthGrant, resource_of
from ._parse import USAGE, AddRequest, carries_secret, check_secret, parse_add
from ._store import AuthKind, Rejected, Saved, ServerEntry

if TYPE_CHECKING:
    from ._extension import RemoteMcpExtension

__all__ = ["build_commands"]

_LIST_LIMIT = 100
_NAME_SHOWN = 40
_NAME_SCAN = 4096  # of a name: enough to hold any key, bounded whatever the file holds
_REJECTED_SHOWN = 20


def quotable(text: str) -> bool:
    """Whether ``text`` is shaped like a server name and not like a key (only then is it quoted)."""
    return is_server_name(text) and not looks_like_credential(text)


def not_a_name(args: str) -> bool:
    """Whether arguments that should be a server name (or nothing) may be something else, a key say."""
    args = args.strip()
    return bool(args) and args not in ("--help", "-h", "help") and not quotable(args)


def _shown_name(name: str) -> str:
    return name if is_server_name(name) else "that entry"


def _no_such_server(name: str) -> str:
    # Only a well-formed name is quoted back: anything else may be a key typed in the wrong place.
    shown = f"named {name!r}" if quotable(name) else "by that name"
    return f"There is no server {shown}. /mcp_list shows them."


def _rejected_label(rejected: Rejected, redact: Callable[[str], str]) -> str:
    """A rejected entry's name as whoever wrote the file chose it: made safe to show, and short.

    Control and format characters go (a name could rewrite the terminal or hide text), then the
    chat's credentials, then the rest is cut: redacting first, so a cut never leaves part of a key.
    """
    if rejected.name is None:
        return f"entry #{rejected.index + 1}"
    name = "".join(
        c for c in rejected.name[:_NAME_SCAN] if unicodedata.category(c)[0] not in "CZ" or c == " "
    )
    name = redact(name)
    name = name if len(name) <= _NAME_SHOWN else name[: _NAME_SHOWN - 1] + "…"
    return f"{name!r} (entry #{rejected.index + 1})"


def _notice(change: str, name: str, tools: int | None) -> str:
    """What the chat's members are told of a change: the server's name and tool count, never its URL or auth.

    ``tools`` is None for a server that is not connected (yet).
    """
    text = f"The chat's owner {change} the remote MCP server {name}"
    if change == "removed":
        return text + (f"; its {tools} tools are gone." if tools else ".")
    if tools is not None:
        return text + f": the agent can use its {tools} tools."
    return text + ": the agent can use its tools once it connects."


def build_commands(extension: RemoteMcpExtension) -> list[Command]:
    """The extension's commands; they work, and refuse clearly, even without a host secret."""

    async def servers(ctx: CommandContext) -> ChatServers:
        chat = extension.chat(ctx.session)
        if chat.store is None:
            raise UsageError(f"Remote MCP is disabled: {extension.disabled_reason}")
        await chat.reconcile()
        return chat

    def with_notes(text: str, saved: Saved) -> str:
        # What the write had to move out of the way, so the owner knows where it went.
        return "\n".join([*(f"Note: {note}." for note in saved.notes), text])

    def login(ctx: CommandContext, chat: ChatServers, name: str) -> None:
        """Start the owner's login; the link goes to the owner alone, the outcome to the chat."""
        chat.start_login(name, owner=ctx.sender.id, send_link=ctx.ui.send_private, report=ctx.ui.send)

    async def oauth_entry(chat: ChatServers, entry: ServerEntry) -> tuple[Saved, ServerState]:
        """Save ``entry`` as an ``oauth`` entry without a grant yet, and pick it up."""
        assert chat.store is not None
        entry = replace(entry, auth_kind="oauth", oauth=OAuthGrant(resource_of(entry.url)))
        saved = await anyio.to_thread.run_sync(chat.store.put, entry)
        return saved, await chat.add_now(entry)

    async def add(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        request = parse_add(ctx.args)
        # The host's egress policy, before any secret is asked for or anything is saved.
        if refusal := extension.connector.settings.egress.url_refusal(request.url):
            raise ValidationError("url", f"This host will not connect to that URL: {refusal}.")
        for header in request.ask:
            bearer = header == "Authorization" and request.bearer
            what = "the bearer token" if bearer else f"the value of the {header} header"
            answer = await ctx.ui.ask(
                f"Send {what} for {request.name}. It stays out of the conversation, and I delete your message.",
                secret=True,
            )
            if not answer:
                return "No answer came, so nothing was saved."
            if bearer and answer[:7].lower() == "bearer ":
                answer = answer[7:].strip()
            check_secret(what, answer)
            if bearer and len(answer.split()) != 1:
                # A sentence sent while the question waited is not a token.
                return "That is not a token (it has spaces), so nothing was saved. Try /mcp_add again."
            request.headers[header] = f"Bearer {answer}" if bearer else answer
        if request.ask_client_secret:
            answer = await ctx.ui.ask(
                f"Send the client secret for {request.name}. It stays out of the conversation, and I delete your message.",
                secret=True,
            )
            if not answer:
                return "No answer came, so nothing was saved."
            check_secret("the client secret", answer)
            request.client_secret = answer
        kind: AuthKind = "none"
        grant: OAuthGrant | None = None
        if request.oauth:
            kind = "oauth"
            grant = OAuthGrant(resource=resource_of(request.url), client=_preregistered(request))
        elif request.headers:
            kind = "bearer" if request.bearer and len(request.headers) == 1 else "headers"
        entry = request.entry(kind, request.headers, grant)
        assert chat.store is not None
        try:
            saved = await anyio.to_thread.run_sync(chat.store.put, entry)
        except StoreError as exc:
            return f"Could not save {entry.name}: {exc}"
        state = await chat.add_now(entry)
        verb = "Replaced" if saved.changed else "Added"
        connected = len(state.tools) if state.status == "connected" else None
        await ctx.ui.notify(_notice(verb.lower(), entry.name, connected))
        if state.needs_login and entry.auth_kind == "none":
            # It answered 401 with OAuth metadata: it wants a login, not headers.
            try:
                saved, state = await oauth_entry(chat, entry)
            except StoreError as exc:
                return f"Could not save {entry.name}: {exc}"
        if state.needs_login:
            login(ctx, chat, entry.name)
            return with_notes(
                f"{verb} {entry.name}: this server needs a login. I sent you the link to log in "
                "(privately); the chat goes on meanwhile, and I say here when it is done.",
                saved,
            )
        if state.status == "connected":
            shown = ", ".join(state.tools[:_LIST_LIMIT]) or "none"
            return with_notes(f"{verb} {entry.name}: {chat.state_text(state)}: {shown}.", saved)
        return with_notes(
            f"{verb} {entry.name}, but it is {chat.state_text(state)}. /mcp_list shows its state.", saved
        )

    async def auth(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        name = ctx.args.strip()
        if not name:
            raise UsageError("usage: /mcp_auth <name>")
        state = chat.servers.get(name)
        if state is None:
            return _no_such_server(name)
        if state.entry.auth_kind != "oauth":
            if state.entry.auth_kind != "none":
                return f"{name} uses headers, not a login. Add it again with /mcp_add to change that."
            try:
                _, state = await oauth_entry(chat, state.entry)
            except StoreError as exc:
                return f"Could not save {name}: {exc}"
        login(ctx, chat, name)
        return f"I sent you the link to log in to {name} (privately); the chat goes on meanwhile."

    async def remove(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        name = ctx.args.strip()
        if not name:
            raise UsageError("usage: /mcp_remove <name>")
        if not is_server_name(name) and name not in {r.name for r in chat.rejected}:
            return _no_such_server(name)
        assert chat.store is not None
        state = chat.servers.get(name)
        tools = len(state.tools) if state else 0
        try:
            saved = await anyio.to_thread.run_sync(chat.store.remove, name)
        except StoreError as exc:
            return f"Could not remove {_shown_name(name)}: {exc}"
        await chat.file_changed()
        if not saved.changed:
            return with_notes(_no_such_server(name), saved)
        if state is not None:  # an entry that failed verification never gave the chat a tool
            await ctx.ui.notify(_notice("removed", name, tools))
        return with_notes(
            f"Removed {_shown_name(name)}" + (f"; its {tools} tools are gone." if tools else "."), saved
        )

    async def restore(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        assert chat.store is not None
        try:
            saved = await anyio.to_thread.run_sync(chat.store.restore)
        except StoreError as exc:
            return f"Nothing was restored: {exc}."
        await chat.file_changed()
        if not saved.changed:
            return "servers.json is already the copy Playa saved last; nothing to restore."
        count = len(chat.servers)
        return with_notes(
            f"Put back the copy of servers.json Playa saved last: {count} server{'' if count == 1 else 's'}.",
            saved,
        )

    async def list_(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        if not chat.servers and not chat.rejected and not chat.warning:
            return "No remote MCP servers. Add one with /mcp_add <name> <url> [--bearer]."
        lines: list[str] = []
        for name, state in sorted(chat.servers.items()):
            entry = state.entry
            auth = ", ".join(entry.header_names) if entry.header_names else "none"
            tools = "all" if entry.tools is None else ", ".join(entry.tools)
            lines += [
                f"{name}: {chat.state_text(state)}",
                f"  url: {entry.shown_url}",
                f"  transport: {entry.transport}; tools: {tools}; auth headers: {auth}",
            ]
            lines += [f"  withheld from the model: {tool}: {why}" for tool, why in chat.withheld(state)]
        for rejected in chat.rejected[:_REJECTED_SHOWN]:
            label = _rejected_label(rejected, chat.redactor.redact)
            lines.append(f"{label}: ignored: {rejected.reason}. Remove it, or add it again with /mcp_add.")
        if (more := len(chat.rejected) - _REJECTED_SHOWN) > 0:
            lines.append(f"… and {more} more ignored entries.")
        if chat.warning:
            lines.append(f"servers.json cannot be used: {chat.warning}")
        return "\n".join(lines)

    async def tools(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        name = ctx.args.strip() or None
        if name is not None and name not in chat.servers:
            return _no_such_server(name)
        lines: list[str] = []
        for server, state in sorted(chat.servers.items()):
            if name is not None and server != name:
                continue
            if not state.tools:
                lines.append(f"{server}: no tools ({chat.state_text(state)})")
            for exposed in state.tools:
                tool = chat.tool(exposed)
                # Redacted before the cut: a cut first could keep the head of a credential.
                summary = chat.redactor.redact(tool.description).splitlines()[0][:120] if tool else ""
                lines.append(f"{exposed} — {summary}")
        return "\n".join(lines) or "No remote MCP servers. Add one with /mcp_add."

    return [
        Command(
            "mcp_add",
            "connect a remote MCP server to this chat",
            add,
            usage=USAGE,
            carries_secret=carries_secret,
        ),
        Command(
            "mcp_auth",
            "log in to a remote MCP server that needs OAuth",
            auth,
            usage="/mcp_auth <name>",
            carries_secret=not_a_name,
        ),
        Command(
            "mcp_remove",
            "disconnect a remote MCP server",
            remove,
            usage="/mcp_remove <name>",
            carries_secret=not_a_name,
        ),
        Command("mcp_list", "the chat's remote MCP servers and their state", list_, usage="/mcp_list"),
        Command(
            "mcp_restore",
            "put back the last server file Playa saved, when it was rolled back, replaced or deleted",
            restore,
            usage="/mcp_restore",
            carries_secret=not_a_name,
        ),
        Command(
            "mcp_tools",
            "the tools of the chat's remote MCP servers",
            tools,
            usage="/mcp_tools [name]",
            carries_secret=not_a_name,
        ),
    ]


def _preregistered(request: AddRequest) -> OAuthClientInformationFull | None:
    """The client the owner registered with the authorization server themselves, if any."""
    if request.client_id is None:
        return None
    method = "client_secret_basic" if request.client_secret else "none"
    return OAuthClientInformationFull(
        client_id=request.client_id,
        client_secret=request.client_secret,
        token_endpoint_auth_method=method,
    )
