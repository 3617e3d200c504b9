"""Task-augmented tool calls (MCP 2025-11-25 tasks): create the task, follow it, fetch its result.

A tool whose ``execution.taskSupport`` is ``required`` cannot be called plainly: the call must
ask for a task (``tools/call`` with ``task``), which the server answers with a ``CreateTaskResult``
at once. The client then polls ``tasks/get`` (at the server's ``pollInterval``) until the task
is done, and fetches its outcome with ``tasks/result``, which is the tool's ``CallToolResult``.
While the task waits for input (``input_required``) ``tasks/result`` is called at once: the
server delivers its questions on that request's stream, and answers it once the task is done.

The SDK (mcp 2.3) carries the 2025-11-25 task types but sends none of these requests itself,
and it validates every ``tools/call`` answer as a ``CallToolResult``, which a ``CreateTaskResult``
is not: the creating request goes through the session's dispatcher as a raw request (one place,
``create_task``); ``tasks/get`` and ``tasks/result`` are ordinary typed requests.

In the 2026-07-28 protocol tasks left the core for an extension this client does not speak, so
there a task-required tool cannot run, and neither can it on a server that does not say it runs
``tools/call`` as tasks (its ``tasks.requests.tools.call`` capability).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import anyio
import mcp_types
from mcp.client import Client
from mcp.shared.dispatcher import CallOptions, ProgressFnT
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._clock import Progress, ProgressReport

__all__ = [
    "TERMINAL",
    "PendingTask",
    "cancel_task",
    "create_task",
    "follow_task",
    "get_task",
    "poll_seconds",
    "task_required",
    "task_result",
    "unrunnable_reason",
]

TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
"""Task states that no longer change."""

MIN_POLL: Final = 0.2
"""The fastest a task is polled, whatever the server suggests: a ``pollInterval`` of 0 must not spin."""
MAX_POLL: Final = 30.0
"""The slowest a task is polled: a huge ``pollInterval`` must not hide a finished task for long."""
DEFAULT_POLL: Final = 1.0
TASK_TTL_MS: Final = 15 * 60 * 1000
"""How long the server is asked to keep a task and its result (it may keep it shorter or longer)."""


@dataclass(eq=False, kw_only=True)
class PendingTask:
    """A task the server still runs when the call's time was up; ``Connection.finish_task`` follows it on."""

    server: str
    tool: str
    """The server's name of the tool."""
    task: mcp_types.Task
    started: float
    """When the call began (the event loop's clock): the follow ends ``call_max`` after it."""

    @property
    def task_id(self) -> str:
        return self.task.task_id

    @property
    def label(self) -> str:
        """The task's id as shown to the chat and the model: the server chose it, so it is cut."""
        task_id = " ".join(self.task_id.split())
        return task_id if len(task_id) <= 40 else task_id[:39] + "…"


def task_required(tool: mcp_types.Tool | None) -> bool:
    """Whether the tool can only be called as a task (``execution.taskSupport: required``)."""
    return tool is not None and tool.execution is not None and tool.execution.task_support == "required"


def unrunnable_reason(tool: mcp_types.Tool, protocol: str | None, capabilities: Any) -> str | None:
    """Why this host cannot call ``tool`` on this connection, or None when it can.

    ``capabilities`` is the server's ``ServerCapabilities`` (its ``tasks`` is an extra field in
    the SDK's model, read here as plain data).
    """
    if not task_required(tool):
        return None
    if protocol in MODERN_PROTOCOL_VERSIONS:
        return f"it runs only as a task, which this host does not speak in protocol {protocol}"
    tasks = _field(capabilities, "tasks")
    if _field(_field(_field(tasks, "requests"), "tools"), "call") is None:
        return "it runs only as a task, and the server does not offer tool calls as tasks"
    return None


def _field(value: Any, name: str) -> Any:
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(name)
    found = getattr(value, name, None)
    if found is None and (extra := getattr(value, "model_extra", None)):
        found = extra.get(name)
    return found


def poll_seconds(task: mcp_types.Task) -> float:
    """Seconds until the next ``tasks/get``: the server's ``pollInterval``, within bounds."""
    if task.poll_interval is None:
        return DEFAULT_POLL
    return min(MAX_POLL, max(MIN_POLL, task.poll_interval / 1000))


async def create_task(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    *,
    timeout: float,
    on_progress: ProgressFnT | None,
) -> mcp_types.Task:
    """Call ``name`` as a task; the server's answer is the task it created.

    Raises what the SDK raises (``MCPError``, ``ValidationError`` for an answer that is no task).
    """
    session = client.session
    params = mcp_types.CallToolRequestParams(
        name=name, arguments=arguments, task=mcp_types.TaskMetadata(ttl=TASK_TTL_MS)
    )
    options: CallOptions = {
        "timeout": timeout,
        "headers": {MCP_PROTOCOL_VERSION_HEADER: client.protocol_version},
    }
    if on_progress is not None:
        # Progress of a task's work comes with the creating request's token.
        options["on_progress"] = on_progress
    # The one raw request (see the module docstring): the SDK would refuse a CreateTaskResult.
    raw = await session._dispatcher.send_raw_request(  # pyright: ignore[reportPrivateUsage]
        "tools/call", params.model_dump(by_alias=True, mode="json", exclude_none=True), options
    )
    return mcp_types.CreateTaskResult.model_validate(raw).task


async def get_task(client: Client, task_id: str, *, timeout: float) -> mcp_types.Task:
    """The task's state now (``tasks/get``)."""
    return await client.session.send_request(
        mcp_types.GetTaskRequest(params=mcp_types.GetTaskRequestParams(task_id=task_id)),
        mcp_types.GetTaskResult,
        request_read_timeout_seconds=timeout,
    )


async def task_result(client: Client, task_id: str, *, timeout: float | None) -> mcp_types.CallToolResult:
    """The task's outcome (``tasks/result``): waits until the task is done; its questions come meanwhile."""
    return await client.session.send_request(
        mcp_types.GetTaskPayloadRequest(params=mcp_types.GetTaskPayloadRequestParams(task_id=task_id)),
        mcp_types.CallToolResult,
        request_read_timeout_seconds=timeout,
    )


async def follow_task(
    client: Client, pending: PendingTask, on_progress: ProgressReport | None, *, poll_timeout: float
) -> mcp_types.CallToolResult:
    """Poll the task until it is done (or waits for input), then fetch its result.

    Each state's message goes to ``on_progress`` when it changes; each ``tasks/get`` may take
    ``poll_timeout`` seconds. Raises what the SDK raises.
    """
    shown: str | None = None
    while pending.task.status not in TERMINAL and pending.task.status != "input_required":
        if on_progress is not None and pending.task.status_message != shown:
            shown = pending.task.status_message
            await on_progress(Progress(message=shown))
        await anyio.sleep(poll_seconds(pending.task))
        pending.task = await get_task(client, pending.task_id, timeout=poll_timeout)
    # Waits until the task is done; the server's questions come on this request's stream.
    return await task_result(client, pending.task_id, timeout=None)


async def cancel_task(client: Client, task_id: str, *, timeout: float) -> None:
    """Ask the server to stop a task nobody waits for any more (``tasks/cancel``)."""
    await client.session.send_request(
        mcp_types.CancelTaskRequest(params=mcp_types.CancelTaskRequestParams(task_id=task_id)),
        mcp_types.CancelTaskResult,
        request_read_timeout_seconds=timeout,
    )
