"""A task-running MCP server written by hand, for the calls that outlive their turn."""

from __future__ import annotations

import json
from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

from servers.python_servers import buffered, json_or_none

__all__ = ["TaskServer"]


class TaskServer:
    """A 2025-11-25 MCP server written by hand (ASGI, JSON answers, no session) with one task-only tool.

    The SDK's servers run no tasks; this one speaks just enough of the protocol: ``initialize``,
    ``tools/list`` (``slow``, ``execution.taskSupport: required``), a task-augmented
    ``tools/call``, ``tasks/get`` (``working`` until ``done`` is set, then ``completed``),
    ``tasks/result`` and ``tasks/cancel``. Every other method is refused, as an older server
    refuses ``server/discover``. ``methods`` lists the requests' methods in order.
    """

    def __init__(self, *, status_message: str = "working", result_text: str = "the report") -> None:
        self.status_message = status_message
        self.result_text = result_text
        self.done = anyio.Event()
        self.fetched = anyio.Event()
        """Set once ``tasks/result`` was answered."""
        self.polls = 0
        self.methods: list[str] = []

    def _task(self) -> dict[str, Any]:
        return {
            "taskId": "t-1",
            "status": "completed" if self.done.is_set() else "working",
            "statusMessage": self.status_message,
            "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttl": 60000,
            "pollInterval": 100,
        }

    def result(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        self.methods.append(method)
        if method == "initialize":
            return {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}},
                "serverInfo": {"name": "tasks", "version": "1"},
            }
        if method == "tools/list":
            slow = {
                "name": "slow",
                "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "required"},
            }
            return {"tools": [slow]}
        if method == "tools/call" and params.get("task") is not None:
            return {"task": self._task()}
        if method == "tasks/get":
            self.polls += 1
            return self._task()
        if method == "tasks/result":
            self.fetched.set()
            return {"content": [{"type": "text", "text": self.result_text}]}
        if method == "tasks/cancel":
            return {**self._task(), "status": "cancelled"}
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body, _ = await buffered(receive)
        request = json_or_none(body)
        status, payload = 405, b""  # no listening stream (GET), no session (DELETE)
        if scope["method"] == "POST" and isinstance(request, dict):
            if "id" not in request:
                status = 202
            else:
                result = self.result(str(request.get("method")), request.get("params") or {})
                answer = (
                    {"result": result}
                    if result is not None
                    else {"error": {"code": -32601, "message": "Method not found"}}
                )
                status, payload = 200, json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}).encode()
        headers = [(b"content-type", b"application/json")] if payload else []
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})
