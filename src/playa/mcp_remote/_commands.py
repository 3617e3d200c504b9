"""The owner's commands: ``/mcp_add``, ``/mcp_remove``, ``/mcp_list``, ``/mcp_tools``, the
decisions on changed tools: ``/mcp_review``, ``/mcp_approve``, ``/mcp_reject``, and the call
policies: ``/mcp_policy``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from mcp.shared.auth import OAuthClientInformationFull

from ..core import ChatSession, Command, CommandContext, holds_key, render_approval
from ..exceptions import StoreError, UsageError, ValidationError
from ..mcp import is_server_name
from ._chat import ChatServers
from ._parse import USAGE, AddRequest, carries_secret, check_secret, parse_add
from ._server import LoginStart, RemoteServer
from ._views import (
    added_text,
    audit_text,
    login_started,
    notice,
    policy_list,
    server_list,
    server_words,
    tool_list,
)
from .store import (
    DECISIONS,
    READ_ONLY_MARKS,
    AuthKind,
    OAuthGrant,
    Saved,
    decision_of,
    read_only_of,
    resource_of,
)

__all__ = ["OpenServers", "build_commands"]

OpenServers = Callable[[ChatSession], Awaitable[ChatServers]]
"""The chat's servers for an owner's command, picked up afresh from the file (``UsageError``
when remote MCP is disabled): the one service the commands call."""

PASTE_FLAG = "--paste"
AUDIT_SHOWN = 20
AUDIT_MAX = 500
POLICY_USAGE = (
    "usage: /mcp_policy lists the policies; /mcp_policy <name> [tool] allow|ask|deny sets one: "
    "allow calls at once, ask waits for your /allow or /deny, deny never offers the tool to the agent; "
    "/mcp_policy <name> [tool] read-only|not-read-only says whether it only reads: data the agent read "
    "elsewhere may then go into it without your decision"
)
_POLICY_MEANS = {
    "allow": "the agent calls it at once",
    "ask": "each call waits for your decision",
    "deny": "the agent is not offered it",
}
_AUTH_USAGE = (
    "usage: /mcp_auth <name> to log in; /mcp_auth <name> --paste to send the address a login ended at"
)


def quotable(text: str) -> bool:
    """Whether ``text`` is shaped like a server name and not like a key (only then is it quoted)."""
    return is_server_name(text) and not holds_key(text)


def not_a_name(args: str) -> bool:
    """Whether arguments that should be a server name (or nothing) may be something else, a key say."""
    args = args.strip()
    return bool(args) and args not in ("--help", "-h", "help") and not quotable(args)


def not_a_count(args: str) -> bool:
    """Whether ``/mcp_audit``'s arguments may be something other than a count (a key, say)."""
    args = args.strip()
    return bool(args) and args not in ("--help", "-h", "help") and not (args.isascii() and args.isdigit())


def _shown_name(name: str) -> str:
    return name if quotable(name) else "that entry"


async def _words_privately(ctx: CommandContext, words: str) -> str:
    """Send what servers said to the owner's private chat; the note for the group's reply."""
    if await ctx.ui.send_private(words) is None:
        return "\nWhat the server said is not shown here; start a private chat with me to get it there."
    return "\nWhat the server said went to your private chat."


def _no_such_server(name: str) -> str:
    # Only a well-formed name is quoted back: anything else may be a key typed in the wrong place.
    if holds_key(name):
        return "That looks like a key, not a server name (not repeated here). /mcp_list shows the names."
    shown = f"named {name!r}" if quotable(name) else "by that name"
    return f"There is no server {shown}. /mcp_list shows them."


def build_commands(open_servers: OpenServers, clock: Callable[[], float]) -> list[Command]:
    """The extension's commands; they work, and refuse clearly, even without a host secret."""

    async def servers(ctx: CommandContext, *, announce: bool = True) -> ChatServers:
        chat = await open_servers(ctx.session)
        if ctx.is_owner:
            # Where tool changes reach the owner from now on; and what waited for them, now.
            # A review or a decision shows them itself (``announce`` False): a change the owner
            # is shown by the command that approves it must not count as seen.
            await chat.owner_seen(ctx.ui, announce=announce)
        return chat

    def server_named(chat: ChatServers, args: str, usage: str) -> RemoteServer:
        name = args.strip()
        if not name:
            raise UsageError(f"usage: {usage}")
        state = chat.servers.get(name)
        if state is None:
            raise UsageError(_no_such_server(name))
        return state

    def with_notes(text: str, saved: Saved) -> str:
        # What the write had to move out of the way, so the owner knows where it went.
        return "\n".join([*(f"Note: {note}." for note in saved.notes), text])

    async def login(ctx: CommandContext, chat: ChatServers, name: str) -> tuple[LoginStart, str]:
        """Start the owner's login; the link goes to the owner alone, the outcome to the chat.

        Returns, once it is known, what happened to the link (sent, and where, or why not) and
        the words for it.
        """
        start = await chat.start_login(
            name, owner=ctx.sender.id, send_link=ctx.ui.send_private, report=ctx.ui.send
        )
        return start, login_started(name, start, ctx.ui.private_place, chat.login_timeout)

    async def add(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        request = parse_add(ctx.args)
        # The host's egress policy, before any secret is asked for or anything is saved.
        if refusal := chat.url_refusal(request.url):
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
            # A sentence sent while the question waited is not a secret: a token is one word, a
            # header value at most two (an auth scheme and its credential).
            if len(answer.split()) > (1 if bearer else 2):
                shape = "a token (it has spaces)" if bearer else "a header value (it reads like a sentence)"
                return f"That is not {shape}, so nothing was saved. Try /mcp_add again."
            request.headers[header] = f"Bearer {answer}" if bearer else answer
        if request.ask_client_secret:
            answer = await ctx.ui.ask(
                f"Send the client secret for {request.name}. It stays out of the conversation, and I delete your message.",
                secret=True,
            )
            if not answer:
                return "No answer came, so nothing was saved."
            check_secret("the client secret", answer)
            if len(answer.split()) != 1:
                return (
                    "That is not a client secret (it has spaces), so nothing was saved. Try /mcp_add again."
                )
            request.client_secret = answer
        kind: AuthKind = "none"
        grant: OAuthGrant | None = None
        if request.oauth:
            kind = "oauth"
            grant = OAuthGrant(resource=resource_of(request.url), client=_preregistered(request))
        elif request.headers:
            kind = "bearer" if request.bearer and len(request.headers) == 1 else "headers"
        entry = request.entry(kind, request.headers, grant)
        previous = chat.servers.get(entry.name)
        if previous is not None and (previous.entry.url, previous.entry.tools) == (entry.url, entry.tools):
            # The same server added again (to retry it, or to change its key) keeps its pins: a
            # re-add must not approve, unseen, a change that waits for the owner.
            entry = replace(entry, pins=previous.entry.pins)
        if previous is not None:
            # A replacement keeps the owner's policies (a re-add never loosens one); --policy
            # sets the server's own.
            kept = previous.entry.policy
            entry = replace(entry, policy=kept.setting(None, request.policy) if request.policy else kept)
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
        text = added_text(verb, entry.name, state, clock(), words=not group)
        if group and state.detail:
            text += await _words_privately(ctx, f"{entry.name}: the server said: {state.detail}")
        return with_notes(text, saved)

    async def auth(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        name, _, rest = ctx.args.strip().partition(" ")
        if not name:
            raise UsageError(_AUTH_USAGE)
        rest = rest.strip()
        if rest:
            return await paste(ctx, chat, rest)
        state = chat.servers.get(name)
        if state is None:
            return _no_such_server(name)
        if state.entry.auth_kind != "oauth":
            if state.entry.auth_kind != "none":
                return f"{name} uses headers, not a login. Add it again with /mcp_add to change that."
            try:
                _, state = await chat.add_for_login(state.entry)
            except StoreError as exc:
                return f"Could not save {name}: {exc}"
        start, started = await login(ctx, chat, name)
        return started if start.why is not None else f"Logging in to {name}. {started}"

    async def paste(ctx: CommandContext, chat: ChatServers, rest: str) -> str:
        """The owner pastes the address their browser ended at, where the redirect could not reach us.

        Taken as a secret answer (never in the conversation; deleted or hidden by the front end),
        and checked as the redirect listener checks a request, and more: the login must be this
        chat's and this sender's.
        """
        if rest == PASTE_FLAG:
            answer = await ctx.ui.ask(
                "Send the address of the page your browser ended at after the login. It stays out "
                "of the conversation, and I delete your message.",
                secret=True,
            )
            if not answer:
                return "No answer came, so no login was completed."
        elif len(rest.split()) == 1:
            answer = rest
        else:
            raise UsageError(_AUTH_USAGE)
        done = chat.complete_login(answer, owner=ctx.sender.id)
        if done is None:
            # Never quoted back: it may be anything, a key included.
            redirect = chat.login_redirect_uri
            shown = f": it starts with {redirect}" if redirect is not None else ""
            return f"That is not the address of the page a login ends at{shown}. No login was completed."
        return done

    async def remove(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        name = ctx.args.strip()
        if not name:
            raise UsageError("usage: /mcp_remove <name>")
        if not is_server_name(name) and name not in {r.name for r in chat.rejected}:
            return _no_such_server(name)
        try:
            saved, tools, revoked = await chat.remove(name)
        except StoreError as exc:
            return f"Could not remove {_shown_name(name)}: {exc}"
        if not saved.changed:
            return with_notes(_no_such_server(name), saved)
        if tools is not None:  # an entry that failed verification never gave the chat a tool
            await ctx.ui.notify(notice("removed", name, tools))
        text = f"Removed {_shown_name(name)}" + (f"; its {tools} tools are gone." if tools else ".")
        return with_notes(f"{text} {revoked.text}" if revoked.text else text, saved)

    async def restore(ctx: CommandContext) -> str:
        chat = await servers(ctx)
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

    async def list_(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        if not ctx.session.group:
            return server_list(chat, clock())
        # A group reads the reply: what the servers said goes to the owner alone.
        text = server_list(chat, clock(), words=False)
        if (words := server_words(chat)) is not None:
            text += await _words_privately(ctx, words)
        return text

    async def audit(ctx: CommandContext) -> str:
        text = ctx.args.strip() or str(AUDIT_SHOWN)
        if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= AUDIT_MAX:
            raise UsageError(f"usage: /mcp_audit [n], n from 1 to {AUDIT_MAX} (default {AUDIT_SHOWN})")
        shown = audit_text(await (await servers(ctx)).audit_records(int(text)))
        # Who did what in the chat is the owner's to read: a group sees none of it.
        if await ctx.ui.send_private(shown) is None:
            return (
                "I could not send you the audit log privately. Start a private chat with me first, "
                "then run /mcp_audit again."
            )
        return f"I sent you the latest records of this chat's audit log {ctx.ui.private_place}."

    async def policy(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        words = ctx.args.split()
        if not words:
            return policy_list(chat.servers, chat.policies.default, chat.redactor)
        if len(words) not in (2, 3):
            raise UsageError(POLICY_USAGE)
        name, tool, decision = words[0], words[1] if len(words) == 3 else None, decision_of(words[-1])
        if name not in chat.servers:
            return _no_such_server(name)
        read_only = read_only_of(words[-1])
        if decision is None and read_only is None:
            shown = f"{words[-1]!r} is" if quotable(words[-1]) else "That is"
            known = ", ".join((*DECISIONS, *READ_ONLY_MARKS))
            raise UsageError(f"{shown} not a policy: give one of {known}. {POLICY_USAGE}")
        if tool is not None and holds_key(tool):
            raise UsageError(
                "That looks like a key, not a tool name (not repeated here). /mcp_tools shows them."
            )
        if read_only is not None:
            return await _marked(chat, name, tool, read_only)
        assert decision is not None
        try:
            before = await chat.policies.set(name, tool, decision)
        except StoreError as exc:
            return f"Nothing was changed: {exc}"
        if before is None:
            return _no_such_server(name)
        what = f"{tool} of {name}" if tool is not None else f"every tool of {name} without its own policy"
        text = f"Policy of {what}: {decision} ({_POLICY_MEANS[decision]}); it was {before}."
        return text + _unknown_tool(chat, name, tool)

    async def tools(ctx: CommandContext) -> str:
        chat = await servers(ctx)
        name = ctx.args.strip() or None
        if name is not None and name not in chat.servers:
            return _no_such_server(name)
        return tool_list(chat, name, clock())

    async def review(ctx: CommandContext) -> str:
        chat = await servers(ctx, announce=False)
        name = ctx.args.strip()
        states = [server_named(chat, name, "/mcp_review [name]")] if name else list(chat.servers.values())
        shown: list[str] = []
        for state in sorted(states, key=lambda s: s.entry.name):
            approval = await chat.review(state)
            if isinstance(approval, str):  # too large to show: rejected, and why
                shown.append(approval)
            elif approval is not None:
                shown.append(render_approval(approval))
        if not shown:
            return (
                f"No tool changes of {name} wait for review." if name else "No tool changes wait for review."
            )
        return "\n\n".join(shown)

    async def decide(ctx: CommandContext, *, approve: bool) -> str:
        chat = await servers(ctx, announce=False)
        usage = "/mcp_approve <name>" if approve else "/mcp_reject <name>"
        # After the name, an approval's digest: what a button shows is what it decides.
        name, _, digest = ctx.args.strip().partition(" ")
        state = server_named(chat, name, usage)
        try:
            return await chat.decide(state.entry.name, approve=approve, digest=digest.strip() or None)
        except StoreError as exc:
            return f"Nothing was decided: {exc}"
        finally:
            await chat.owner_seen(ctx.ui)

    async def approve(ctx: CommandContext) -> str:
        return await decide(ctx, approve=True)

    async def reject(ctx: CommandContext) -> str:
        return await decide(ctx, approve=False)

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
            usage=_AUTH_USAGE,
            carries_secret=_auth_carries_secret,
        ),
        Command(
            "mcp_remove",
            "disconnect a remote MCP server",
            remove,
            usage="/mcp_remove <name>",
            carries_secret=not_a_name,
        ),
        Command(
            "mcp_list",
            "the chat's remote MCP servers and their state",
            list_,
            usage="/mcp_list",
            read_only=True,
        ),
        Command(
            "mcp_audit",
            "the latest records of the chat's audit log: what was done with its servers and tools",
            audit,
            usage=f"/mcp_audit [n] (default {AUDIT_SHOWN})",
            carries_secret=not_a_count,
            read_only=True,
        ),
        Command(
            "mcp_restore",
            "put back the last server file Playa saved, when it was rolled back, replaced or deleted",
            restore,
            usage="/mcp_restore",
            carries_secret=not_a_name,
        ),
        Command(
            "mcp_review",
            "the new or changed tools of a server that wait for your decision",
            review,
            usage="/mcp_review [name]",
            carries_secret=not_a_name,
            read_only=True,
        ),
        Command(
            "mcp_approve",
            "let the agent use a server's new or changed tools, as /mcp_review shows them",
            approve,
            usage="/mcp_approve <name>",
            carries_secret=not_a_name,
        ),
        Command(
            "mcp_reject",
            "keep a server's new or changed tools from the agent until they change again",
            reject,
            usage="/mcp_reject <name>",
            carries_secret=not_a_name,
        ),
        Command(
            "mcp_policy",
            "whether the agent may call a server's tools: allow, ask you first, or deny",
            policy,
            usage=POLICY_USAGE,
            carries_secret=_policy_carries_secret,
            # The list only shows; setting one changes the chat.
            read_only=lambda args: not args.strip(),
        ),
        Command(
            "mcp_tools",
            "the tools of the chat's remote MCP servers",
            tools,
            usage="/mcp_tools [name]",
            carries_secret=not_a_name,
            read_only=True,
        ),
    ]


async def _marked(chat: ChatServers, name: str, tool: str | None, read_only: bool) -> str:
    """``/mcp_policy <name> [tool] read-only|not-read-only``: seal the owner's mark, and say so."""
    try:
        before = await chat.policies.mark(name, tool, read_only)
    except StoreError as exc:
        return f"Nothing was changed: {exc}"
    if before is None:
        return _no_such_server(name)
    what = f"{tool} of {name}" if tool is not None else f"every tool of {name} without its own mark"
    now, then = ("read-only" if mark else "not read-only" for mark in (read_only, before))
    means = (
        "data the agent read elsewhere in a turn may go into it without your decision"
        if read_only
        else "data the agent read elsewhere in a turn goes into it as the flow guard allows"
    )
    return f"Read-only mark of {what}: {now} ({means}); it was {then}." + _unknown_tool(chat, name, tool)


def _unknown_tool(chat: ChatServers, name: str, tool: str | None) -> str:
    """A note when the server offers no tool named ``tool`` now (what was set waits for it)."""
    connection = state.connection if (state := chat.servers.get(name)) is not None else None
    if tool is not None and connection is not None and tool not in {t.name for t in connection.tools}:
        return f" {name} offers no tool named {tool} now: the policy applies if it comes."
    return ""


def _policy_carries_secret(args: str) -> bool:
    """``/mcp_policy`` takes a name, a tool and a word: anything key-shaped among them may be a key."""
    return any(holds_key(word) for word in args.split())


def _auth_carries_secret(args: str) -> bool:
    """``/mcp_auth <name>`` and ``/mcp_auth <name> --paste`` carry none; a pasted address holds a code."""
    name, _, rest = args.strip().partition(" ")
    return not_a_name(name) or rest.strip() not in ("", PASTE_FLAG)


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
