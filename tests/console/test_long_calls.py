"""Long calls in the console: progress on the status line (a line in a pipe), task tools end to end."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest

from playa.console import ConsoleUI, run_console
from playa.mcp_remote import ConnectionSettings, HostSecret, RemoteMcpSettings
from servers.node import server_everything
from support.host import remote_host

pytestmark = pytest.mark.anyio


class Terminal(io.StringIO):
    """A terminal's output that tells a waiting test when some text has been written."""

    def __init__(self) -> None:
        super().__init__()
        self.wanted = ""
        self.seen = anyio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if self.wanted and self.wanted in text:
            self.seen.set()
        return written


async def test_the_status_line_shows_the_newest_progress_while_a_turn_runs() -> None:
    terminal = Terminal()
    ui = ConsoleUI(io.StringIO(), terminal, interactive=True)
    with anyio.fail_after(10):
        async with ui.working():
            terminal.wanted = "demo__slow: 2/3 — halfway"
            await ui.progress("demo__slow#1", "demo__slow: 1/3")
            await ui.progress("demo__slow#1", "demo__slow: 2/3 — halfway\x1b[2J")
            await terminal.seen.wait()
    # The line is redrawn in place, its control sequences dropped, and cleared when the turn ends.
    assert "\x1b[2J" not in terminal.getvalue()
    assert terminal.getvalue().endswith("\r\x1b[K")


@pytest.mark.npm
async def test_a_piped_console_prints_progress_and_runs_task_tools(
    data_dir: Path, host_secret: HostSecret
) -> None:
    connection = ConnectionSettings(connect_timeout=15.0, call_timeout=15.0, call_max=60.0)
    settings = RemoteMcpSettings(connection=connection)
    stdout = io.StringIO()
    with anyio.fail_after(90):
        async with server_everything() as url, remote_host(data_dir, host_secret, settings=settings) as host:
            lines = [
                f"/mcp_add everything {url}",
                'everything__trigger-long-running-operation {"duration": 3, "steps": 3}',
                'everything__simulate-research-query {"topic": "tides"}',
            ]
            await run_console(host, stdin=io.StringIO("".join(f"{line}\n" for line in lines)), stdout=stdout)
    out = stdout.getvalue()
    assert "… everything__trigger-long-running-operation: 1/3" in out
    assert "Long running operation completed. Duration: 3 seconds, Steps: 3." in out
    assert "… everything__simulate-research-query: Gathering sources..." in out
    assert "[offline model] everything__simulate-research-query returned:\n# Research Report: tides" in out
