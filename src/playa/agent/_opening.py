"""A chat's blocking file work when its session opens, in one worker-thread hop."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio
from pydantic_ai.messages import ModelMessage

from ..core import ChatSession, Extension
from ._history import History, read_file

__all__ = ["OpenStep", "open_files"]


@dataclass(eq=False)
class OpenStep:
    """An extension's blocking step of a session's open (``Extension.session_opening``)."""

    extension: Extension
    run: Callable[[], None]
    failure: Exception | None = None
    """What the step raised, kept for the host to log on the event loop (where the chat's
    redactor is): a worker thread must not build it."""

    def __call__(self) -> None:
        try:
            self.run()
        except Exception as exc:  # boundary: an extension's failure is logged and contained
            self.failure = exc


async def open_files(session: ChatSession, steps: Sequence[OpenStep]) -> History:
    """A chat's file work at its open, in one worker-thread hop rather than a hop each (every one
    queued for the GIL behind the others' in a storm of opens): make the workspace folder, read
    the history when the data dir keeps it, run the extensions' ``steps``. Returns the history
    (read from the database afterwards when that keeps it).

    The hops share the default thread limiter: with 1,000 chats opening at once, a limiter of 4
    for them made the storm slower (more CPU per connection), each hop waiting for the GIL the
    event loop holds, and fewer of them waiting side by side.
    """
    folder = session.state_dir if session.storage is None else None

    def work() -> tuple[list[ModelMessage], list[int]] | None:
        if not session.workspace.is_dir():
            # Looked at first: a chat opened before has its folder, and a ``mkdir`` that fails
            # costs a second system call (each a wait for the GIL while a host opens its chats).
            session.workspace.mkdir(parents=True, exist_ok=True)
        read = read_file(folder) if folder is not None else None
        for step in steps:
            step()
        return read

    read = await anyio.to_thread.run_sync(work)
    if folder is not None and read is not None:
        return History.of_file(folder, read)
    if session.storage is None:
        raise ValueError(f"the session of {session.scope} has no folder for its history")
    return await History.open_rows(session.storage.history, session.scope)
