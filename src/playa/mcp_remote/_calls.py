"""A model's call to a server's tool: a connection that works, progress shown, a task that outlives its turn."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..core import UI, ChatSession, LateResult, ToolResult
from ..exceptions import CallFailed, NeedsLogin, RemoteError, RemoteTimeout, ToolError
from ..mcp import map_result
from ._flow import FlowGuard
from ._policies import Permit, Policies
from ._server import RemoteServer
from .store import AuditLog
from .transport import Connection, ConnectionSettings, PendingTask, ProgressFeed

__all__ = ["Calls"]

logger = logging.getLogger(__name__)


@dataclass
class _Seen:
    """What a call's audit record needs to know that its result does not say."""

    timed_out: bool = False
    refused: bool = False
    """The owner's policy kept it from the server (denied, declined, unanswered)."""


class Calls:
    """The calls of one chat's tools to their servers.

    A broken connection is dropped and the next call reconnects (``connect``); a call is never
    retried, as it may have had effects. Handed the chat's servers (read only), ``connect``,
    ``needs_login`` (the server waits for the owner's login), ``step_up`` (asks the owner to log
    in with the scope a call was refused for; whether they were asked) and ``write_section``;
    ``policies`` decides whether a call may go to its server at all, and ``flows`` (the flow
    guard) whether its arguments carry another server's data, which the owner must allow first.
    """

    def __init__(
        self,
        session: ChatSession,
        servers: Mapping[str, RemoteServer],
        *,
        settings: ConnectionSettings,
        task_group: TaskGroup,
        redact: Callable[[str], str],
        connect: Callable[[RemoteServer], Awaitable[None]],
        needs_login: Callable[[RemoteServer, str], None],
        step_up: Callable[[RemoteServer], Awaitable[bool]],
        write_section: Callable[[], None],
        audit: AuditLog,
        policies: Policies,
        flows: FlowGuard,
    ) -> None:
        self._session = session
        self._servers = servers
        self._settings = settings
        self._tg = task_group
        self._redact = redact
        self._connect = connect
        self._needs_login = needs_login
        self._step_up = step_up
        self._write_section = write_section
        self._audit = audit
        self._policies = policies
        self._flows = flows

    def _redact_out(self, text: str) -> str:
        """Text this extension shows the chat itself: its own credentials and the host's removed."""
        text = self._redact(text)
        return self._session.redact(text) if self._session.redact is not None else text

    async def call(
        self, state: RemoteServer, exposed: str, remote: str, arguments: dict[str, Any]
    ) -> ToolResult:
        """Call ``remote`` (exposed to the model as ``exposed``) on ``state``'s server, with its progress
        shown; recorded in the chat's audit log: whose turn, the names, the outcome, the duration and
        the sizes, never the arguments or the result."""
        started, seen, result, permit = time.perf_counter(), _Seen(), None, None
        try:
            # The one place a call's arguments are checked for data of another source of the turn.
            # A tool the owner marked read-only takes such data without a hold: it sends nothing on.
            held = self._flows.held(
                state.entry.name, remote, arguments, read_only=self._policies.read_only(state, remote)
            )
            try:
                permit = await self._policies.permit(
                    state, exposed, remote, arguments, flows=[flow.describe() for flow in held]
                )
            except anyio.get_cancelled_exc_class():
                # Stopped while the owner was asked: refused, never an error of the server's.
                seen.refused = True
                permit = Permit(self._policies.of(state, remote), "unanswered")
                raise
            if permit.refusal is not None:
                seen.refused = True
                result = ToolResult.error(permit.refusal)
                return result
            result = await self._call(state, exposed, remote, arguments, seen)
            return result
        finally:
            sender = self._session.turn_sender
            self._audit.record(
                "tool_call",
                sender=sender.id if sender is not None else None,
                server=state.entry.name,
                tool=remote,
                outcome="refused"
                if seen.refused
                else "timeout"
                if seen.timed_out
                else "error"
                if result is None or result.is_error
                else "ok",
                # The policy that applied and what came of it (allowed, always, denied, declined…).
                policy=permit.policy if permit is not None else None,
                decision=permit.outcome if permit is not None else None,
                duration_us=round((time.perf_counter() - started) * 1e6),
                arguments_bytes=len(
                    json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str).encode()
                ),
                result_bytes=len(result.text.encode()) if result is not None else 0,
            )

    async def _call(
        self, state: RemoteServer, exposed: str, remote: str, arguments: dict[str, Any], seen: _Seen
    ) -> ToolResult:
        connection = await self._connection_for_call(state)
        ui = self._session.turn_ui
        feed = ProgressFeed(ui, exposed, self._redact_out) if ui is not None else None
        if feed is not None:
            # In the chat's task group: the front end may take its time, the call never waits for it.
            self._tg.start_soon(feed.run)
        final = "failed"
        try:
            result = await connection.call_tool(
                remote,
                arguments,
                timeout=self._settings.call_timeout,
                on_progress=feed.report if feed is not None else None,
            )
            final = "still running" if isinstance(result, PendingTask) else "done"
        except (CallFailed, RemoteTimeout) as exc:
            seen.timed_out = isinstance(exc, RemoteTimeout)
            # The connection marked itself broken: drop it; the next call reconnects. No retry:
            # the call may have had effects on the server.
            if state.connection is connection:
                state.connection = None
                state.reason = self._redact(exc.reason)
                state.detail = self._redact(exc.detail) if exc.detail is not None else None
                self._tg.start_soon(connection.aclose)
            return ToolResult.error(
                f"{exposed} failed: {exc.explained}. The call was not retried; the next call reconnects."
            )
        except NeedsLogin as exc:
            # The token lacks a scope the call needs: the server waits for the owner's login.
            if state.connection is connection:
                state.connection = None
                self._tg.start_soon(connection.aclose)
            auth = connection.endpoint.auth
            step_up = auth is not None and bool(auth.scope)
            if auth is not None and auth.scope:
                state.scope = auth.scope
            self._needs_login(state, exc.reason)
            self._write_section()
            if step_up and await self._step_up(state):
                return ToolResult.error(
                    f"{exposed} failed: {exc.reason}. The owner was sent a link to log in with it; "
                    "the call can be tried again once they have."
                )
            return ToolResult.error(f"{exposed} failed: {state.reason}")
        except RemoteError as exc:
            # The server answered with an error: the connection is fine and stays. A tool
            # result is data: what the server said goes with it.
            return ToolResult.error(f"{exposed} failed: {exc.explained}")
        finally:
            if feed is not None:
                feed.close(final)
        if isinstance(result, PendingTask):
            return self._follow_later(connection, exposed, arguments, result, ui)
        # Not cut here: the host's model-bound gate redacts first, then cuts.
        return map_result(result)

    def _follow_later(
        self,
        connection: Connection,
        exposed: str,
        arguments: dict[str, Any],
        pending: PendingTask,
        ui: UI | None,
    ) -> ToolResult:
        """A task outlived its call: follow it in the background; its result comes to the chat later."""
        call_max = self._settings.call_max
        if ui is None or self._session.deliver_late is None:
            return ToolResult.error(
                f"{exposed} is still running on its server (task {pending.label}), and its result "
                "cannot be brought to this chat later"
            )
        self._tg.start_soon(self._finish_task, connection, exposed, arguments, pending, ui)
        return ToolResult(
            f"{exposed} is still running on its server as a task (task {pending.label}, last state: "
            f"{pending.task.status}). Its result will be posted to the chat when it is done (at most "
            f"{call_max:g} s after the call began), and you will see it then."
        )

    async def _finish_task(
        self, connection: Connection, exposed: str, arguments: dict[str, Any], pending: PendingTask, ui: UI
    ) -> None:
        """Follow a task to its end, in the chat's task group, and hand its result to the chat."""
        feed = ProgressFeed(ui, exposed, self._redact_out)
        note = f"The task of {exposed} (task {pending.label}), still running when its turn ended,"
        # The boundary: this runs in the task group every chat of the host shares.
        async with anyio.create_task_group() as tg:
            tg.start_soon(feed.run)
            try:
                result = map_result(await connection.finish_task(pending, on_progress=feed.report))
                note += " has finished."
            except RemoteError as exc:
                result = ToolResult.error(f"{exposed} failed: {exc.explained}")
                note += " did not finish."
            except Exception as exc:  # boundary: one task's failure must not end the chat's task group
                logger.error("following a task in %s failed: %s", self._session.scope, type(exc).__name__)
                result = ToolResult.error(f"{exposed} failed: internal error ({type(exc).__name__})")
                note += " could not be followed."
            finally:
                feed.close("done" if note.endswith(" has finished.") else "failed")
        self._audit.record(
            "task_finished",
            server=connection.endpoint.server,
            tool=exposed,
            outcome="error" if result.is_error else "ok",
            result_bytes=len(result.text.encode()),
        )
        deliver = self._session.deliver_late
        if deliver is None:
            return
        try:
            await deliver(LateResult(tool_name=exposed, arguments=arguments, result=result, ui=ui, note=note))
        except Exception as exc:  # boundary: the chat may be gone; nothing else depends on this
            logger.warning(
                "a late result in %s was not delivered: %s", self._session.scope, type(exc).__name__
            )

    async def _connection_for_call(self, state: RemoteServer) -> Connection:
        """The server's working connection: a broken one is replaced (one connect at a time)."""
        connection = state.connection
        if connection is not None and not connection.broken:
            return connection  # the common case, without the lock's cost on every call
        async with state.lock:
            connection = state.connection
            if connection is not None and not connection.broken:
                return connection
            if self._servers.get(state.entry.name) is not state:
                raise ToolError(f"{state.entry.name} was removed")
            if state.connecting and state.attempt is not None:
                await state.attempt.wait()
            else:
                state.connection = None
                state.attempt = anyio.Event()
                await self._connect(state)
            if state.connection is None:
                raise ToolError(f"{state.entry.name} is unavailable: {state.reason}")
            return state.connection
