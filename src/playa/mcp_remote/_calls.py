"""A model's call to a server's tool: a connection that works, progress shown, a task that outlives its turn."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio

from ..core import UI, LateResult, ToolResult, process_metrics
from ..exceptions import CallFailed, NeedsLogin, RemoteError, RemoteTimeout
from ..mcp import map_result
from ._flow import FlowGuard
from ._login import Logins
from ._policies import Permit, Policies
from ._progress import ProgressFeed
from ._resources import resource_link_hint
from ._review import Review
from ._server import ChatContext, LoginOwner, RemoteServer
from .transport import Connection, PendingTask

__all__ = ["Calls"]

logger = logging.getLogger(__name__)

_ARGUMENTS_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
"""What ``json.dumps`` with these options uses, made once rather than at every call's audit record."""


@dataclass
class _Seen:
    """What a call's audit record needs to know that its result does not say."""

    timed_out: bool = False
    refused: bool = False
    """The owner's policy kept it from the server (denied, declined, unanswered)."""


class Calls:
    """The calls of one chat's tools to their servers.

    A broken connection is dropped and the next call reconnects (``RemoteServer.connection_for_call``);
    a call is never retried, as it may have had effects. ``policies`` decides whether a call may go
    to its server at all, and ``flows`` (the flow guard) whether its arguments carry another
    server's data, which the owner must allow first. A call refused for want of a scope asks the
    owner to log in with it (``logins``), through the front end of their latest command (``review``).
    """

    def __init__(
        self, context: ChatContext, *, policies: Policies, flows: FlowGuard, logins: Logins, review: Review
    ) -> None:
        self._session = context.session
        self._settings = context.settings.connection
        self._tg = context.task_group
        self._redact = context.secrets.redact
        self._redact_out = context.secrets.redact_out
        self._audit = context.audit
        self._policies = policies
        self._flows = flows
        self._logins = logins
        self._review = review

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
            outcome = (
                "refused"
                if seen.refused
                else "timeout"
                if seen.timed_out
                else "error"
                if result is None or result.is_error
                else "ok"
            )
            process_metrics().tool_call(state.entry.name, failed=outcome in ("error", "timeout"))
            self._audit.record(
                "tool_call",
                sender=sender.id if sender is not None else None,
                server=state.entry.name,
                tool=remote,
                outcome=outcome,
                # The policy that applied and what came of it (allowed, always, denied, declined…).
                policy=permit.policy if permit is not None else None,
                decision=permit.outcome if permit is not None else None,
                duration_us=round((time.perf_counter() - started) * 1e6),
                arguments_bytes=len(_ARGUMENTS_JSON.encode(arguments).encode()),
                result_bytes=len(result.text.encode()) if result is not None else 0,
            )

    async def _call(
        self, state: RemoteServer, exposed: str, remote: str, arguments: dict[str, Any], seen: _Seen
    ) -> ToolResult:
        connection = await state.connection_for_call()
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
            state.call_failed(connection, exc)
            return ToolResult.error(
                f"{exposed} failed: {exc.explained}. The call was not retried; the next call reconnects."
            )
        except NeedsLogin as exc:
            # The token lacks a scope the call needs: the server waits for the owner's login.
            if state.call_needs_login(connection, exc.reason) and await self._step_up(state):
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
        return map_result(result, link_hint=resource_link_hint(state.entry.name))

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
                result = map_result(
                    await connection.finish_task(pending, on_progress=feed.report),
                    link_hint=resource_link_hint(connection.endpoint.server),
                )
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

    async def _step_up(self, state: RemoteServer) -> bool:
        """A call needs a scope the login lacks: the owner is sent a link for it (``Logins.step_up``).

        Sent where the owner's latest command came from, privately; with none known yet (after
        a restart), nobody is asked and the chat says what the owner can run.
        """
        ui = self._review.owner_ui
        if ui is None:
            return False
        return await self._logins.step_up(state, LoginOwner(self._session.owner, ui.send_private, ui.send))
