"""A chat's servers in its sealed file, behind the async seam (``ServerStorage``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from ._entry import ServerEntry
from ._store import LoadResult, Saved, ServerStore

__all__ = ["FileServers"]


@dataclass(eq=False)
class FileServers:
    """``ServerStore`` for callers on the event loop: its reads and writes take a lock and fsync,
    so each runs in a worker thread; ``changed`` is one ``lstat`` and stays on the loop."""

    file: ServerStore

    @property
    def scope(self) -> str:
        return self.file.scope

    async def changed(self) -> bool:
        return self.file.changed()

    async def load(self) -> LoadResult:
        return await anyio.to_thread.run_sync(self.file.load)

    async def save(self, entries: Sequence[ServerEntry]) -> Saved:
        return await anyio.to_thread.run_sync(self.file.save, entries)

    async def put(self, entry: ServerEntry) -> Saved:
        return await anyio.to_thread.run_sync(self.file.put, entry)

    async def rewrite(self, entry: ServerEntry, *, built_from: ServerEntry) -> Saved | None:
        return await anyio.to_thread.run_sync(partial(self.file.rewrite, entry, built_from=built_from))

    def taken(self, saved: Saved) -> None:
        self.file.taken(saved)

    async def remove(self, name: str) -> Saved:
        return await anyio.to_thread.run_sync(self.file.remove, name)

    async def restore(self) -> Saved:
        return await anyio.to_thread.run_sync(self.file.restore)
