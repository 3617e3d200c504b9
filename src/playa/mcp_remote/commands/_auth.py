"""The owner's logins: ``/mcp_auth <name>`` starts one, ``/mcp_auth <name> --paste`` completes one
whose redirect could not reach this host."""

from __future__ import annotations

from ...core import CommandContext
from ...exceptions import StoreError
from .._chat import ChatServers
from .._server import LoginOwner, LoginStart
from ._access import ChatAccess
from ._replies import login_started, no_such_server
from ._requests import AuthRequest

__all__ = ["auth", "login", "paste"]


async def login(ctx: CommandContext, chat: ChatServers, name: str) -> tuple[LoginStart, str]:
    """Start the owner's login; the link goes to the owner alone, the outcome to the chat.

    Returns, once it is known, what happened to the link (sent, and where, or why not) and the
    words for it.
    """
    start = await chat.logins.start(name, LoginOwner(ctx.sender.id, ctx.ui.send_private, ctx.ui.send))
    return start, login_started(name, start, ctx.ui.private_place, chat.logins.timeout)


async def auth(access: ChatAccess, ctx: CommandContext) -> str:
    chat = await access.servers(ctx)
    request = AuthRequest.parse(ctx)
    if not request.login:
        return await paste(ctx, chat, request)
    name = request.server.text
    state = chat.servers.get(name)
    if state is None:
        return no_such_server(request.server)
    if (grant := state.login.held(state.entry)) is not None and grant.machine:
        # A machine client (--grant client-credentials) gets its tokens itself, at each connect.
        return f"{name} needs no login: it gets its own tokens with its client's credentials. /mcp_list shows its state."
    if state.entry.auth_kind != "oauth":
        if state.entry.auth_kind != "none":
            return f"{name} uses headers, not a login. Add it again with /mcp_add to change that."
        try:
            _, state = await chat.add_for_login(state.entry)
        except StoreError as exc:
            return f"Could not save {name}: {exc}"
    start, started = await login(ctx, chat, name)
    return started if start.why is not None else f"Logging in to {name}. {started}"


async def paste(ctx: CommandContext, chat: ChatServers, request: AuthRequest) -> str:
    """The owner pastes the address their browser ended at, where the redirect could not reach us.

    Taken as a secret answer (never in the conversation; deleted or hidden by the front end),
    and checked as the redirect listener checks a request, and more: the login must be this
    chat's and this sender's.
    """
    answer = request.pasted
    if request.ask_address:
        answer = await ctx.ui.ask(
            "Send the address of the page your browser ended at after the login. It stays out "
            "of the conversation, and I delete your message.",
            secret=True,
        )
        if not answer:
            return "No answer came, so no login was completed."
    assert answer is not None
    done = chat.logins.paste(answer, owner=ctx.sender.id)
    if done is None:
        # Never quoted back: it may be anything, a key included.
        redirect = chat.logins.redirect_uri
        shown = f": it starts with {redirect}" if redirect is not None else ""
        return f"That is not the address of the page a login ends at{shown}. No login was completed."
    return done
