"""/stop in the console: read while a turn runs, so the owner can stop it."""

from __future__ import annotations

import io
import os
from pathlib import Path

import anyio
import pytest

from playa.console import run_console
from support.host import new_host
from support.providers import hang, serve_provider, text

pytestmark = pytest.mark.anyio


async def test_stop_typed_during_a_turn_stops_it_and_lines_typed_meanwhile_run_after(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    stdout = io.StringIO()
    async with serve_provider() as provider:
        step = hang()
        provider.script(step, text("answer to the queued line"))
        async with new_host(tmp_path, provider.model("openai-chat")) as host:
            with os.fdopen(read_fd, "r") as stdin:

                async def type_lines() -> None:
                    os.write(write_fd, b"think hard\n")
                    with anyio.fail_after(30):
                        await step.reached.wait()
                    os.write(write_fd, b"typed while it runs\n/stop\n")
                    with anyio.fail_after(30):
                        await step.disconnected.wait()
                    os.close(write_fd)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(type_lines)
                    with anyio.fail_after(60):
                        await run_console(host, stdin=stdin, stdout=stdout)
    out = stdout.getvalue()
    stopping = out.index("Stopping the running turn.")
    stopped = out.index("Stopped. Your message was not kept")
    queued = out.index("answer to the queued line")
    assert stopping < stopped < queued
    assert [r.body["messages"][-1]["content"] for r in provider.requests] == [
        "think hard",
        "typed while it runs",
    ]
