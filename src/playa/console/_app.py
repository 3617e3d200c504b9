"""The console chat: messages handled one at a time, in the order typed, until end of input."""

from __future__ import annotations

import getpass
import sys
from contextlib import nullcontext
from typing import TextIO

import anyio

from ..agent import Host
from ..core import (
    NOTHING_TO_ANSWER,
    NOTHING_TO_CANCEL,
    IncomingMessage,
    Sender,
    classify,
)
from ._attach import ATTACH, attached
from ._input import ANSWER_WORDS
from ._live import ConsoleLive
from ._ui import ConsoleUI

__all__ = ["run_console"]


async def run_console(
    host: Host,
    *,
    scope_name: str = "default",
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    banner: str | None = None,
) -> None:
    """Chat in the console until end of input.

    Messages are handled one at a time, in the order typed. Meanwhile ``/stop`` runs at once,
    and while a question waits, the lines typed go to it and commands still run (``LineRouter``).
    """
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    ui = ConsoleUI(stdin, stdout, interactive=stdin.isatty() and stdout.isatty())
    user = getpass.getuser()
    session = await host.session(f"console:{scope_name}", owner=user)
    sender = Sender(id=user, name=user, is_owner=True)
    if banner and ui.interactive:
        await ui.send(banner)

    async def now(line: str) -> None:
        reply = await host.handle(session, IncomingMessage(line, sender, None), ui)
        if reply is not None:
            await ui.send(reply.text)

    async with anyio.create_task_group() as tg:

        def run_now(line: str) -> None:
            tg.start_soon(now, line)

        ui.beside(host.commands, run_now)
        async with ui._router.pumping():
            while (text := await ui.read_message()) is not None:
                parsed = classify(text, host.commands).command
                try:
                    if (
                        parsed is not None
                        and parsed.name in ANSWER_WORDS
                        and host.commands.get(parsed.name) is None
                    ):
                        await ui.send(NOTHING_TO_CANCEL if parsed.name == "cancel" else NOTHING_TO_ANSWER)
                        continue
                    incoming = IncomingMessage(text, sender, None)
                    if parsed is not None and parsed.name == ATTACH and host.commands.get(ATTACH) is None:
                        found = await attached(host, session, sender, parsed.args)
                        if isinstance(found, str):
                            await ui.send(found)
                            continue
                        incoming = found
                    # A turn's reply streams in a terminal; a command's reply comes whole.
                    live = ConsoleLive(ui, stdout) if ui.interactive and parsed is None else None
                    async with ui.working(), live.running() if live is not None else nullcontext():
                        reply = await host.handle(session, incoming, ui, live=live)
                        # Inside: the status line is cleared after the reply's line is ended.
                        shown = reply is not None and live is not None and live.finish(reply.text)
                finally:
                    ui.done_with_message()
                if reply is not None and reply.text and not shown:  # /mcp's panel is its reply
                    await ui.send(reply.text)
                ui.prompt_again()
