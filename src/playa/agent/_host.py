"""The host: answers a chat's messages, with a command or an agent turn over the chat's history."""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Collection, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Self
from weakref import WeakKeyDictionary

import anyio
from pydantic_ai.exceptions import ModelAuthenticationError, ModelRequestTimeout
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from ..core import (
    UI,
    ChatSession,
    Command,
    CommandContext,
    CommandRouter,
    Extension,
    Inbound,
    IncomingMessage,
    LateResult,
    Redactor,
    Sender,
    ToolResult,
    ToolRules,
    classify,
    install_outbound_gate,
    open_workspace,
    outbound_secrets,
    scope_folder,
    session_state_dir,
)
from ..exceptions import ToolError, UsageError
from ._agent import SessionToolset, build_agent, model_content
from ._attachments import Prompt, turn_prompt
from ._command_turn import command_turn
from ._config import HostConfig, resolve_model
from ._context import ContextBudget, definition_tokens, estimate_tokens, latest_turns
from ._extensions import ChatRedactors, Extensions
from ._gate import GatedModel, GateMemory, gate_messages
from ._history import History
from ._offline import is_offline
from ._opening import open_files
from ._sessions import ChatSessions, ScopeMove
from ._stream import LiveReply, ReplyStream, can_stream
from ._turns import NOT_KEPT, RunningTurns, key_refused

__all__ = ["Host", "Reply"]

logger = logging.getLogger(__name__)

_DELETE_FAILED = (
    "I could not delete your message, and it holds a credential: delete it yourself, "
    "and rotate the key, since others may have seen it."
)
_KEY_NOT_SENT = "That message looks like a key, so it was not sent to the agent{deleted}."
_KEY_HOW_TO = (
    " To connect a server with it: /mcp_add <name> <url> --bearer, and give the key when I ask "
    "(the question keeps it out of the conversation)."
)
_REDIRECT_NOT_SENT = (
    "That is the address a login ended at: it holds a one-time code, so it was not sent to the "
    "agent{deleted}."
)
_REDIRECT_NOT_OWNER = " Only the chat's owner can complete a login with it."
_REDIRECT_NO_LOGIN = " No login here waits for it."
_NEAR_COMMAND = (
    "That looks like /{name} but is not a command, and it holds a key: it was not sent to the "
    "agent{deleted}. Send it again starting with /{name} (one slash, the name as written)."
)
_KEY_MASKED = (
    "Your message held a key: the agent got it with [redacted] in the key's place{deleted}. "
    "If the key is real, rotate it."
)


@dataclass(frozen=True, slots=True)
class Reply:
    """What the host answers to one message; the front end shows it."""

    text: str
    kind: Literal["command", "agent", "error"]


@dataclass(eq=False)
class _Conversation:
    """What the agent keeps of one chat session: its history, and the gate's verdicts on it."""

    history: History
    gate: GateMemory = field(default_factory=GateMemory)


class Host:
    """Runs chats: use ``async with Host(config, extensions) as host``.

    The open sessions (open, evict, move, close) are ``ChatSessions``'; the extensions' hooks are
    called through ``Extensions``; the host answers each message, with a command or a turn.
    """

    def __init__(self, config: HostConfig, extensions: Sequence[Extension] = ()) -> None:
        self.config = config
        self.extensions = list(extensions)
        self.commands = CommandRouter()
        install_outbound_gate()
        self._model = resolve_model(config.model)
        self.context = ContextBudget.for_model(self._model, config.context_tokens)
        self._agent = build_agent(config.tool_search)
        env_secrets = config.env.denied_values()
        outbound_secrets().add(env_secrets)
        self._redactors = ChatRedactors(self.extensions, env_secrets)
        self._extensions = Extensions(self.extensions, config.hook_timeout, self._redactors)
        self._sessions = ChatSessions(
            config.data_dir, self._new_session, self._extensions, self._redactors, config.storage
        )
        self._conversations: WeakKeyDictionary[ChatSession, _Conversation] = WeakKeyDictionary()
        """The agent's side of each session, for as long as the session object lives."""
        self._stack: AsyncExitStack | None = None
        self._running = RunningTurns()
        self.commands.add(Command("help", "list the commands", self._help, owner_only=False, read_only=True))
        self.commands.add(Command("reset", "forget this chat's conversation", self._reset))
        self.commands.add(Command("stop", "stop the agent's running turn", self._stop))
        for extension in self.extensions:
            for command in extension.commands():
                self.commands.add(command)

    async def __aenter__(self) -> Self:
        async with AsyncExitStack() as stack:
            for extension in self.extensions:
                await stack.enter_async_context(extension.lifespan())
            tg = await stack.enter_async_context(anyio.create_task_group())
            # Run in reverse: sessions close while the eviction task may still finish its own
            # (shielded, bounded) closes; then it is stopped.
            stack.callback(tg.cancel_scope.cancel)
            stack.push_async_callback(self._sessions.close_all)
            if math.isfinite(self.config.session_idle):
                tg.start_soon(self._sessions.evict_idle_forever, self.config.session_idle)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            # Not shielded here: an extension's task group must be exited in its own cancel
            # scope; each extension shields its own bounded teardown.
            await stack.aclose()

    def hook_timeout(self, extension: Extension) -> float:
        """The bound on one hook of ``extension``: the config's, or longer if the extension needs it."""
        return self._extensions.timeout(extension)

    # Sessions

    async def session(self, scope: str, *, owner: str) -> ChatSession:
        """The session of a chat, started (SessionStart hooks) on first use or after it was closed.

        Chats open side by side (a restarted bot meets many at once); two callers for one chat
        get the one session.
        """
        return await self._sessions.get(scope, owner)

    async def move_scope(self, old_scope: str, new_scope: str, *, owner: str) -> ScopeMove:
        """Move a chat to a new scope: a Telegram group upgraded to a supergroup gets a new id.

        The old scope's session closes once its running turn ends; its workspace and history
        folders become the new scope's (with a database, its workspace's and history's rows
        too); every extension re-binds what it sealed for the old scope (``on_scope_move``);
        then the new session starts. Messages for either scope wait meanwhile. When the new
        scope already holds files of its own (in a folder or in rows) nothing is moved, so
        nothing is lost: ``"occupied"``.
        """
        return await self._sessions.move(old_scope, new_scope, owner)

    @property
    def open_sessions(self) -> int:
        """How many chat sessions are open now."""
        return len(self._sessions)

    async def evict_idle(self, idle: float | None = None, *, scopes: Collection[str] | None = None) -> int:
        """Close the sessions that handled no message for ``idle`` seconds (default: the config's),
        of ``scopes`` only when given (a chat another process serves now: ``idle=0``).

        A session handling a message is never closed. Returns how many were closed.
        """
        return await self._sessions.evict_idle(self.config.session_idle if idle is None else idle, scopes)

    def history(self, session: ChatSession) -> History:
        """The chat's conversation as the agent keeps it (also of a session closed since)."""
        return self._conversations[session].history

    async def _new_session(self, scope: str, owner: str) -> ChatSession:
        workspace = self.config.data_dir / "workspaces" / scope_folder(scope)
        state_dir = session_state_dir(self.config.data_dir, scope)
        storage = self.config.storage
        files = open_workspace(workspace, scope, storage, quota=self.config.workspace_quota)
        core = files.tools()
        session = ChatSession(
            scope=scope,
            owner=owner,
            workspace=workspace,
            state_dir=state_dir,
            storage=storage,
            core_tools=frozenset(tool.name for tool in core),
            tool_rules=ToolRules.for_model(self._model),
        )
        session.files = files
        # The chat's blocking file work, the extensions' too, in one worker-thread hop.
        steps = self._extensions.opening(session)
        history = await open_files(session, steps)
        self._extensions.opened(session, steps)
        self._conversations[session] = _Conversation(history)
        session.redact = partial(self.redact, session)
        session.deliver_late = partial(self._deliver_late, session)
        for tool in core:
            session.tools.register(tool)
        return session

    # Messages

    async def handle(
        self, session: ChatSession, message: IncomingMessage, ui: UI, *, live: LiveReply | None = None
    ) -> Reply | None:
        """Answer one message: a command, or an agent turn. Empty messages are ignored.

        With ``live``, a turn's reply streams to it as the model writes it (``ReplyStream``);
        the reply returned is the whole one, as without.
        """
        inbound = classify(message.text, self.commands)
        if not inbound.text.strip() and not message.attachments:
            return None
        if not self._sessions.is_current(session):
            # Closed while idle (or being closed, or moved): the chat goes on in a reopened session.
            session = await self.session(session.scope, owner=session.owner)
        session.busy += 1
        try:
            return await self._handle(session, inbound, message, ui, live)
        finally:
            session.busy -= 1
            session.last_used = anyio.current_time()

    async def _handle(
        self, session: ChatSession, inbound: Inbound, message: IncomingMessage, ui: UI, live: LiveReply | None
    ) -> Reply | None:
        notes: list[str] = []
        deleted = False
        if inbound.carries_secret and message.ref is not None:
            deleted = await ui.delete(message.ref)
            self.secret_deleted(session, message.sender, deleted)
            if not deleted:
                notes.append(_DELETE_FAILED)
        if inbound.credential_shaped:
            text = _KEY_NOT_SENT.format(deleted=" and I deleted it" if deleted else "")
            if message.sender.is_owner:
                text += _KEY_HOW_TO
            return Reply(self.redact(session, "\n\n".join([text, *notes])), "command")
        if inbound.oauth_redirect is not None:
            text = await self._pasted_redirect(session, inbound.oauth_redirect, message, deleted)
            return Reply(self.redact(session, "\n\n".join([text, *notes])), "command")
        if inbound.near_command is not None and inbound.command is None:
            text = _NEAR_COMMAND.format(
                name=inbound.near_command, deleted=" and I deleted it" if deleted else ""
            )
            return Reply(self.redact(session, "\n\n".join([text, *notes])), "command")
        parsed = inbound.command
        if parsed is None:
            if inbound.masked_text is not None:
                # The key stays out of the model's request and the history; the person is told.
                masked = _KEY_MASKED.format(deleted=", and I deleted your message" if deleted else "")
                await ui.send(self.redact(session, "\n\n".join([masked, *notes])))
            text, prompt = turn_prompt(inbound.model_text, message.attachments, self._model)
            return await self._turn(session, text, ui, message.sender, prompt, live)
        command = self.commands.get(parsed.name)
        if command is None:
            # Never quoted back nor logged: a mistyped command may hold a key
            # ("/mcp_add--bearer=KEY" has no space before it).
            logger.info("an unknown command in %s from %s", session.scope, message.sender.id)
            hint = f" Did you mean /{inbound.near_command}?" if inbound.near_command else ""
            text = f"Unknown command.{hint}\n\n" + self.commands.help_text(for_owner=message.sender.is_owner)
        else:
            logger.info("command /%s in %s from %s", command.name, session.scope, message.sender.id)
            if command.owner_only and not message.sender.is_owner:
                text = f"Only this chat's owner can use /{command.name}."
            elif parsed.wants_help:
                text = command.help
            else:
                ctx = CommandContext(
                    session, message.sender, parsed.args, ui, args_hold_key=inbound.args_hold_key
                )
                ctx.turn = command_turn(partial(self._turn, session, ui=ui, sender=message.sender))
                text = await self._run_command(session, command, ctx)
        return Reply(self.redact(session, "\n\n".join([text, *notes])), "command")

    def secret_deleted(self, session: ChatSession, sender: Sender, deleted: bool) -> None:
        """A message of ``sender`` that carries a secret was deleted from the chat, or could not be:
        each extension hears it (``on_secret_deleted``). Front ends that delete such a message
        themselves (an edit, a key sent on its own) call this too."""
        self._extensions.secret_deleted(session, sender, deleted)

    async def _pasted_redirect(
        self, session: ChatSession, address: str, message: IncomingMessage, deleted: bool
    ) -> str:
        """A login's redirect address sent as a message: the owner's pending login gets it, once."""
        text = _REDIRECT_NOT_SENT.format(deleted=" and I deleted it" if deleted else "")
        if not message.sender.is_owner:
            return text + _REDIRECT_NOT_OWNER
        logger.info("a login's redirect address in %s from the owner", session.scope)
        answer = await self._extensions.login_redirect(session, message.sender, address)
        return answer if answer is not None else text + _REDIRECT_NO_LOGIN

    async def _run_command(self, session: ChatSession, command: Command, ctx: CommandContext) -> str:
        try:
            return await command.handler(ctx)
        except UsageError as exc:
            return str(exc)
        except Exception as exc:  # boundary: a broken command must not take the chat down
            self._extensions.log_failure(session, f"command /{command.name}", exc)
            return f"Sorry, /{command.name} failed: {type(exc).__name__}: {exc}"

    async def _turn(
        self,
        session: ChatSession,
        text: str,
        ui: UI,
        sender: Sender,
        prompt: Prompt,
        live: LiveReply | None = None,
    ) -> Reply:
        async with session.turn_lock:
            session.turn_ui, session.turn_sender = ui, sender
            try:
                return await self._run_turn(session, text, prompt, live)
            finally:
                session.turn_ui, session.turn_sender = None, None
                self._extensions.turn_ended(session)

    async def _run_turn(
        self, session: ChatSession, text: str, prompt: Prompt, live: LiveReply | None
    ) -> Reply:
        await self._extensions.before_agent_start(session)
        toolset = SessionToolset(
            session,
            self.call_tool,
            # The offline model calls the tool the person names: it must be offered them all.
            search=None if is_offline(self._model) else self.config.tool_search,
            context_tokens=self.context.tokens,
        )
        instructions = self.instructions(session)
        conversation = self._conversations[session]
        history = _window(self.context, conversation.history, text, instructions, toolset, session.scope)
        limits = self.config.model_limits
        # The gate is the only model the agent has: no request can bypass it.
        model = GatedModel(
            self._model, lambda: self.redactor(session), limits=self.config.limits, memory=conversation.gate
        )
        stream = None
        if live is not None and can_stream(self._model):
            # What streams passes the gate the reply passes: the chat's redactor, open tail held.
            stream = ReplyStream(lambda: self.redactor(session), live).handle
        try:
            with self._running.run(session.scope) as running:
                result = await self._agent.run(
                    prompt,
                    model=model,
                    message_history=history,
                    instructions=instructions,
                    toolsets=[toolset],
                    model_settings=limits.request_settings(),
                    event_stream_handler=stream,
                )
        except ModelRequestTimeout:
            logger.warning("the model timed out in %s after %g s", session.scope, limits.timeout)
            return Reply(limits.timed_out(), "error")
        except ModelAuthenticationError as exc:
            self._extensions.log_failure(session, "agent turn", exc)
            return Reply(self.redact(session, f"{key_refused(self._model)}\n\n{NOT_KEPT}"), "error")
        except Exception as exc:  # boundary: a model or provider failure ends the turn, not the chat
            self._extensions.log_failure(session, "agent turn", exc)
            return Reply(
                self.redact(session, f"The model failed: {type(exc).__name__}: {exc}\n\n{NOT_KEPT}"),
                "error",
            )
        if running.cancelled_caught:
            return Reply(f"Stopped. {NOT_KEPT}", "error")
        output = result.output
        try:
            # The history is written outside the sealed store: it gets what the model got.
            await conversation.history.extend(
                gate_messages(result.new_messages(), self.redactor(session), self.config.limits)
            )
        except OSError as exc:
            logger.error("saving the history of %s failed: %s", session.scope, exc.strerror)
            output += f"\n\n(This turn could not be saved to the chat's history: {exc.strerror}.)"
        return Reply(self.redact(session, output), "agent")

    def instructions(self, session: ChatSession) -> str:
        """The base prompt and the chat's prompt sections (the gate redacts them on their way)."""
        parts = [self.config.base_prompt, session.prompt.render()]
        return "\n\n".join(p for p in parts if p)

    # Tools

    async def call_tool(self, session: ChatSession, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call a chat's tool and pass the result, error or not, through every ToolResultEvent hook."""
        try:
            result = await session.tools.callable(name).call(arguments)
        except ToolError as exc:
            result = ToolResult.error(str(exc))
        except Exception as exc:  # boundary: a failing tool is information for the model, not a crash
            result = ToolResult.error(f"{name} failed: {type(exc).__name__}: {exc}")
        return await self._extensions.tool_result(session, name, arguments, result)

    async def _deliver_late(self, session: ChatSession, late: LateResult) -> None:
        """A result that came after its turn: to the chat, and into the history for the next turn.

        The result takes the path of every tool result (the ToolResultEvent hooks), and the
        model-bound gate's: it is kept as a call of the tool and its return, redacted and cut,
        and the chat is shown that same text. It waits for a running turn to end, so the turn's
        messages stay together.
        """
        result = await self._extensions.tool_result(session, late.tool_name, late.arguments, late.result)
        call_id = f"late-{uuid.uuid4().hex[:16]}"
        content = model_content(result)
        head = f"{late.note}\n" + ("It failed: " if result.is_error else "")
        content = head + content if isinstance(content, str) else [head + result.text, *content[1:]]
        gated = gate_messages(
            [
                ModelResponse(parts=[ToolCallPart(late.tool_name, late.arguments, tool_call_id=call_id)]),
                ModelRequest(parts=[ToolReturnPart(late.tool_name, content, tool_call_id=call_id)]),
            ],
            self.redactor(session),
            self.config.limits,
        )
        returned = gated[-1].parts[0]
        assert isinstance(returned, ToolReturnPart)
        first = returned.content[0] if isinstance(returned.content, list) else returned.content
        # The text part of what the model got (a fallback that cannot happen, redacted on its way out).
        shown = first if isinstance(first, str) else head + result.text
        if result.media:
            shown += f"\n({len(result.media)} attachments, which the agent received)"
        async with session.turn_lock:
            try:
                await self._conversations[session].history.extend(gated)
            except OSError as exc:
                logger.error("saving a late result in %s failed: %s", session.scope, exc.strerror)
                shown += f"\n\n(This could not be saved to the chat's history: {exc.strerror}.)"
        await late.ui.send(self.redact(session, shown))

    # Redaction and hooks

    def redactor(self, session: ChatSession | None) -> Redactor:
        """Every credential the chat's extensions know, and the host's own, as one redactor.

        Raises when an extension cannot say (callers fail closed).
        """
        return self._redactors.redactor(session)

    def redact(self, session: ChatSession | None, text: str) -> str:
        """Text on its way out of the host for a chat (a reply, an error), every credential removed."""
        return self._redactors.redact(session, text)

    # Built-in commands

    async def _help(self, ctx: CommandContext) -> str:
        return self.commands.help_text(for_owner=ctx.is_owner)

    async def _stop(self, ctx: CommandContext) -> str:
        if self._running.stop(ctx.session.scope):
            return "Stopping the running turn."
        return "Nothing is running in this chat."

    async def _reset(self, ctx: CommandContext) -> str:
        async with ctx.session.turn_lock:
            await self._conversations[ctx.session].history.clear()
        return "This chat's conversation is forgotten."


def _window(
    context: ContextBudget,
    history: History,
    text: str,
    instructions: str,
    toolset: SessionToolset,
    scope: str,
) -> list[ModelMessage]:
    """The latest turns of the chat's history that fit the context with this turn's prompt."""
    fixed = estimate_tokens(instructions) + estimate_tokens(text) + definition_tokens(toolset.definitions())
    messages, sizes = history.sized()
    window = latest_turns(messages, sizes, context.history_tokens(fixed))
    if window.left_out:
        logger.debug("%s: %d older messages left out of the request", scope, window.left_out)
    return window.messages
