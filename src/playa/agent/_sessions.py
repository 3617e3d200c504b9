"""The open chats: a session per chat, opened on first use, closed when idle, moved, closed at shutdown."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio

from ..core import ChatSession, Storage, outbound_secrets, scope_folder
from ._extensions import ChatRedactors, Extensions

__all__ = ["COLLECT_AFTER", "ChatSessions", "ScopeMove"]

logger = logging.getLogger(__name__)

COLLECT_AFTER = 50
"""Closed chats after which the host frees what they left in reference cycles (see ``_collect_closed``)."""

ScopeMove = Literal["moved", "nothing", "occupied"]
"""What ``Host.move_scope`` did: moved the chat; found nothing to move (never used, or moved
already); or moved nothing because the new scope already holds a chat of its own."""


@dataclass(eq=False, repr=False)
class ChatSessions:
    """The host's open chat sessions, each opened once, closed once, and never two for one chat.

    ``make`` builds a chat's session (its folders, history and tools) without running a hook; the
    extensions' hooks run here, around it: SessionStart once it is open, ScopeMove when it moved,
    SessionClose when it closes.
    """

    data_dir: Path
    make: Callable[[str, str], Awaitable[ChatSession]]
    extensions: Extensions
    redactors: ChatRedactors
    storage: Storage | None = None
    _sessions: dict[str, ChatSession] = field(init=False, default_factory=dict)
    _closing: dict[str, ChatSession] = field(init=False, default_factory=dict)
    _opening: dict[str, anyio.Event] = field(init=False, default_factory=dict)
    """The chats whose session is being made, each with an event set when it is."""
    _moving: dict[str, anyio.Event] = field(init=False, default_factory=dict)
    """Scopes a move is under way from or to; set when it is done."""
    _move_lock: anyio.Lock = field(init=False, default_factory=anyio.Lock)
    _lock: anyio.Lock = field(init=False, default_factory=anyio.Lock)
    _closed_since_collect: int = field(init=False, default=0)

    def __len__(self) -> int:
        return len(self._sessions)

    def is_current(self, session: ChatSession) -> bool:
        """Whether ``session`` is its chat's open session (not closed, closing nor being moved)."""
        return session.scope not in self._moving and self._sessions.get(session.scope) is session

    async def get(self, scope: str, owner: str) -> ChatSession:
        """The session of a chat, started (SessionStart hooks) on first use or after it was closed.

        Chats open side by side (a restarted bot meets many at once); two callers for one chat
        get the one session.
        """
        while True:
            await self._settled(scope)
            if (session := self._sessions.get(scope)) is not None:
                session.last_used = anyio.current_time()
                return session
            if (opening := self._opening.get(scope)) is None:
                break
            await opening.wait()
        opened = self._opening[scope] = anyio.Event()
        try:
            session = await self.make(scope, owner)
            async with self._lock:
                self._sessions[scope] = session
        finally:
            del self._opening[scope]
            opened.set()
        await self.extensions.session_started(session)
        return session

    async def _settled(self, scope: str) -> None:
        """Wait until no move and no close of ``scope`` is under way."""
        while True:
            if (moving := self._moving.get(scope)) is not None:
                await moving.wait()
            elif (closing := self._closing.get(scope)) is not None:
                # The chat's previous session is still closing: its extensions' state must be
                # gone before a new session sets it up again.
                await closing.closed.wait()
            else:
                return

    async def move(self, old_scope: str, new_scope: str, owner: str) -> ScopeMove:
        """Move a chat to a new scope (see ``Host.move_scope``)."""
        if old_scope == new_scope:
            return "nothing"
        async with self._move_lock:
            done = anyio.Event()
            self._moving[old_scope] = self._moving[new_scope] = done
            try:
                for scope in (old_scope, new_scope):
                    await self._close_for_move(scope)
                outcome = await self._move_state(old_scope, new_scope)
                if outcome != "moved":
                    return outcome
                session = await self.make(new_scope, owner)
                await self.extensions.scope_moved(old_scope, session)
                async with self._lock:
                    self._sessions[new_scope] = session
            finally:
                del self._moving[old_scope], self._moving[new_scope]
                done.set()
        logger.info("chat %s moved to %s", old_scope, new_scope)
        await self.extensions.session_started(session)
        return "moved"

    async def _close_for_move(self, scope: str) -> None:
        while True:
            if (closing := self._closing.get(scope)) is not None:
                await closing.closed.wait()
            elif (opening := self._opening.get(scope)) is not None:
                await opening.wait()
            else:
                break
        session = self._sessions.get(scope)
        if session is None:
            return
        # The running turn ends first; later ones wait for the move.
        async with session.turn_lock, self._lock:
            if self._sessions.get(scope) is not session:
                return
            del self._sessions[scope]
            self._closing[scope] = session
        await self._close_all([session])

    async def _move_state(self, old_scope: str, new_scope: str) -> ScopeMove:
        """Move the chat's folders, and with a database its files' and history's rows. When the
        new scope has files of its own (in a folder or in rows) nothing is moved (``"occupied"``);
        when the old one has nothing, ``"nothing"`` (a move done already, and done again after a
        restart, is not refused)."""
        storage = self.storage
        if storage is None:
            return await anyio.to_thread.run_sync(self._move_folders, old_scope, new_scope)
        # A chat served by another process before has rows here and maybe no folder.
        held = bool(await storage.workspace.paths(old_scope, ""))
        if await storage.workspace.paths(new_scope, ""):
            if not held and not await anyio.to_thread.run_sync(self._folder_pairs, old_scope, new_scope):
                return "nothing"
            logger.warning(
                "%s was not moved to %s: that chat already has files of its own", old_scope, new_scope
            )
            return "occupied"
        outcome = await anyio.to_thread.run_sync(self._move_folders, old_scope, new_scope)
        if outcome == "occupied":
            return outcome
        if held and not await storage.workspace.move(old_scope, new_scope):
            logger.warning("the files of %s were not moved to %s: that chat has some", old_scope, new_scope)
        if outcome == "nothing" and not held:
            return "nothing"
        if not await storage.history.move(old_scope, new_scope):
            logger.warning("the history of %s was not moved to %s: that chat has one", old_scope, new_scope)
        return "moved"

    def _folder_pairs(self, old_scope: str, new_scope: str) -> list[tuple[Path, Path]]:
        """The old scope's folders in the data dir (its workspace, its private folder), each with
        the new scope's folder of the same kind."""
        pairs = [
            (self.data_dir / kind / scope_folder(old_scope), self.data_dir / kind / scope_folder(new_scope))
            for kind in ("workspaces", "sessions")
        ]
        return [(old, new) for old, new in pairs if old.is_dir()]

    def _move_folders(self, old_scope: str, new_scope: str) -> ScopeMove:
        pairs = self._folder_pairs(old_scope, new_scope)
        if not pairs:
            return "nothing"
        if any(_holds_files(new) for _, new in pairs):
            logger.warning(
                "%s was not moved to %s: that chat already has files of its own", old_scope, new_scope
            )
            return "occupied"
        for old, new in pairs:
            _remove_empty_tree(new)
            os.replace(old, new)
        return "moved"

    async def evict_idle(self, idle: float, scopes: Collection[str] | None = None) -> int:
        """Close the sessions (of ``scopes``, if given) that handled no message for ``idle``
        seconds; never a busy one.

        Returns how many were closed.
        """
        cutoff = anyio.current_time() - idle
        async with self._lock:
            candidates = (
                self._sessions.values()
                if scopes is None
                else [self._sessions[scope] for scope in scopes if scope in self._sessions]
            )
            idle_sessions = [
                session
                for session in candidates
                if session.busy == 0 and session.last_used <= cutoff and not session.turn_lock.locked()
            ]
            for session in idle_sessions:
                del self._sessions[session.scope]
                self._closing[session.scope] = session
        if idle_sessions:
            logger.info("closing %d idle sessions", len(idle_sessions))
            await self._close_all(idle_sessions)
            self._collect_closed(len(idle_sessions))
        return len(idle_sessions)

    def _collect_closed(self, closed: int) -> None:
        """Free what closed chats left in reference cycles, once enough of them have closed.

        A closed chat's objects (its tasks' frames, the agent run's graph, what they hold: its
        redactor, its connections) sit in reference cycles, which only a full collection frees,
        and the ``playa`` command's collector thresholds make those rare. Unfreed, a bot that
        meets thousands of chats grows by each one it closed. A full collection costs in
        proportion to what is open, so it runs once a quarter as many chats as are open (at least
        COLLECT_AFTER) have closed: memory follows the open chats, at a bounded cost per chat.
        """
        self._closed_since_collect += closed
        if self._closed_since_collect >= max(COLLECT_AFTER, len(self._sessions) // 4):
            self._closed_since_collect = 0
            gc.collect()

    async def evict_idle_forever(self, idle: float) -> None:
        """Close idle sessions, checking a few times per ``idle`` period (at most a minute apart)."""
        while True:
            await anyio.sleep(min(max(idle / 4, 0.01), 60.0))
            await self.evict_idle(idle)

    async def close_all(self) -> None:
        """Close every open session (shutdown)."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await self._close_all(sessions)

    async def _close_all(self, sessions: Sequence[ChatSession]) -> None:
        """Run every session's SessionClose hooks, all sessions at once; each hook is bounded."""
        # Shielded: a cancelled caller (shutdown) must not leave a session half closed, and
        # every wait inside is bounded by a hook timeout.
        with anyio.CancelScope(shield=True), outbound_secrets().releasing_together():
            async with anyio.create_task_group() as tg:
                for session in sessions:
                    tg.start_soon(self._close_session, session)

    async def _close_session(self, session: ChatSession) -> None:
        try:
            await self.extensions.session_closing(session)
        finally:
            session.closed.set()
            self.redactors.forget(session)
            if self._closing.get(session.scope) is session:
                del self._closing[session.scope]


def _holds_files(folder: Path) -> bool:
    """Whether ``folder`` holds anything but empty folders (a symbolic link counts; none is followed)."""
    for root, dirs, files in os.walk(folder):
        if files or any((Path(root) / name).is_symlink() for name in dirs):
            return True
    return False


def _remove_empty_tree(folder: Path) -> None:
    if not folder.exists():
        return
    for root, _, _ in os.walk(folder, topdown=False):
        os.rmdir(root)
