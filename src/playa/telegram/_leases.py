"""Several processes, one bot: the chats this process serves, each under a lease in the database.

Every update is committed to the shared inbox by whichever process receives it; the chat's
holder then handles it, in order. A process takes a chat nobody holds when an update for it
arrives, or when its scan (every third of a lease) finds a chat with records waiting whose
holder stopped renewing (died): then it first delivers the replies the dead holder left in the
outbox, reports the turn it cut ("interrupted", unless its reply was written), and handles the
rest. Every process is woken by PostgreSQL's NOTIFY when a record is added: the chat's holder
handles it; when nobody holds the chat, the processes race for it, so chats spread over them
even when one process receives every update (the poller).

A lease this process fails to renew in time is another's: the chat's work here stops at once.
A chat idle as long as a session is kept is released. A graceful stop releases every lease.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Final

import anyio
from anyio.abc import TaskGroup
from telegram import Update

from ..core import ChatLeases, KeyedLocks, Leadership, process_metrics
from ..exceptions import DatabaseError
from ._journal import Journal
from ._outbox import Outbox
from ._recovery import left_behind

__all__ = ["LEASE_SECONDS", "Leases", "chat_of", "holder_name"]

logger = logging.getLogger(__name__)

LEASE_SECONDS: Final = 15.0
_ORPHANS_A_SCAN: Final = 500
_KEEP_HANDLED: Final = 86400.0
"""Seconds a handled update's name is kept: Telegram redelivers an update for less than a day."""


def holder_name() -> str:
    """This process's name as a lease holder: its host, pid and a random part (never reused)."""
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{secrets.token_hex(4)}"


def chat_of(update: Update) -> int | None:
    """The chat an update belongs to, whose holder handles it; None for one of no chat."""
    message = update.effective_message
    return message.chat.id if message is not None else None


@dataclass(eq=False, repr=False)
class Leases:
    """The chats this process holds, with their takeover, wake-ups, renewal and release."""

    leases: ChatLeases
    _: KW_ONLY
    bot: str
    inbox: Journal
    outbox: Outbox
    seconds: float
    idle: float
    holder: str = field(init=False, default_factory=holder_name)
    held: dict[int, float] = field(init=False, default_factory=dict)
    """Each chat held, with when it was last active (the event loop's clock)."""
    _locks: KeyedLocks[int] = field(init=False, default_factory=KeyedLocks)
    _elsewhere: dict[int, float] = field(init=False, default_factory=dict)
    """Chats another process held when this one last tried, until when it does not try again."""
    _retakes: set[int] = field(init=False, default_factory=set)
    """Chats held elsewhere that will be tried again when their lease runs out."""
    _routed: dict[int, set[str]] = field(init=False, default_factory=dict)
    """The inbox records of each chat already routed here (their turns may be running)."""
    _tg: TaskGroup | None = field(init=False, default=None)
    _route: Callable[[Update, str], Awaitable[None]] | None = field(init=False, default=None)
    _drop: Callable[[int], Awaitable[None]] | None = field(init=False, default=None)
    _busy: Callable[[int], bool] = field(init=False, default=lambda chat: False)

    async def run(
        self,
        tg: TaskGroup,
        *,
        route: Callable[[Update, str], Awaitable[None]],
        drop: Callable[[int], Awaitable[None]],
        busy: Callable[[int], bool],
    ) -> None:
        """Serve until cancelled: wake-ups, renewal, takeover and release. ``route`` handles one
        stored update of a held chat; ``drop`` stops a chat's work here (lost or released);
        ``busy`` says whether a chat has work here (a turn, a question)."""
        self._tg, self._route, self._drop, self._busy = tg, route, drop, busy
        async with anyio.create_task_group() as own:
            own.start_soon(self._listen)
            while True:
                try:
                    await self._tick()
                except DatabaseError as exc:
                    logger.warning("renewing the chats' leases failed: %s", exc)
                await anyio.sleep(self.seconds / 3)

    async def _listen(self) -> None:
        """Be woken by new records, listening again when the connection is lost (the scan covers
        the time between)."""
        while True:
            try:
                async with self.leases.listen(self.bot, self._woken) as lost:
                    await lost.wait()
                logger.warning("the wake-ups' connection was lost; listening again")
            except DatabaseError as exc:
                logger.warning("listening for new records failed: %s", exc)
            await anyio.sleep(self.seconds / 3)

    def _woken(self, chat: str) -> None:
        # Every process is woken: the holder serves; when nobody holds the chat, the processes
        # race for it (one wins), so the chats spread over them even when one receives them all.
        chat_id = int(chat)
        if self._tg is None:
            return
        if chat_id in self.held or self._elsewhere.get(chat_id, -math.inf) < anyio.current_time():
            self._tg.start_soon(self.serve, chat_id)

    async def receive(self, update: Update) -> bool:
        """Commit ``update`` to the inbox, then serve its chat if nobody else does; False when
        it has no chat (the caller handles it at once)."""
        chat_id = chat_of(update)
        if chat_id is None:
            return False
        name = f"{update.update_id:020d}"
        if not await self.inbox.add(name, chat_id, {"update": update.to_dict()}):
            return True  # received before: it is, or was, handled once
        if self._tg is not None:
            self._tg.start_soon(self.serve, chat_id)
        return True

    async def serve(self, chat_id: int) -> None:
        """Hold ``chat_id`` if nobody else does, and route its waiting updates here, in order."""
        try:
            async with self._locks.of(chat_id):
                if chat_id not in self.held and not await self._take(chat_id):
                    return  # another process holds it, and was woken
                self.held[chat_id] = anyio.current_time()
                await self._pump(chat_id, answered=set())
        except DatabaseError as exc:
            logger.warning("chat %s could not be served: %s", chat_id, exc)
        finally:
            if chat_id not in self.held:
                self._locks.forget_unused(chat_id)  # a chat another process serves leaves nothing here

    async def _retake(self, chat_id: int, after: float) -> None:
        """Try ``chat_id`` again once its lease has run out, if its records still wait: a live
        holder has handled them by then (and is left alone); a dead one's chat is taken over."""
        await anyio.sleep(after + 0.05)
        self._retakes.discard(chat_id)
        try:
            if chat_id not in self.held and await self.inbox.load(chat_id):
                await self.serve(chat_id)
        except DatabaseError as exc:
            logger.warning("chat %s could not be tried again: %s", chat_id, exc)

    async def _take(self, chat_id: int) -> bool:
        taken = await self.leases.take(self.bot, str(chat_id), self.holder, self.seconds)
        if taken is None:
            self._elsewhere[chat_id] = anyio.current_time() + self.seconds
            if chat_id not in self._retakes and self._tg is not None:
                # Its holder may be dead: tried again the moment its lease runs out, not at a
                # scan up to a third of a lease later.
                self._retakes.add(chat_id)
                left = await self.leases.remaining(self.bot, str(chat_id))
                self._tg.start_soon(self._retake, chat_id, max(0.0, left or 0.0))
            return False
        self._elsewhere.pop(chat_id, None)
        if taken == "moved":
            process_metrics().lease_moves += 1
            logger.info("took over chat %s from a process that stopped renewing its lease", chat_id)
        self.held[chat_id] = anyio.current_time()
        self._routed[chat_id] = set()
        # What an earlier holder left: its undelivered replies go out first, in order.
        assert self._tg is not None
        resumed = await self.outbox.resume(self._tg, chat_id)
        await self._pump(chat_id, answered={d.answers for d in resumed if d.answers})
        return True

    async def _pump(self, chat_id: int, *, answered: set[str]) -> None:
        routed = self._routed.setdefault(chat_id, set())
        records = await self.inbox.load(chat_id)
        routed &= {name for name, _ in records}  # the rest are handled
        for name, record in records:
            if name in routed:
                continue
            routed.add(name)
            update = await left_behind(self.inbox, self.outbox, name, record, answered=answered)
            if update is None:
                continue
            assert self._route is not None
            await self._route(update, name)

    async def _tick(self) -> None:
        before = set(self.held)  # a chat taken while the renewal runs is not lost
        renewed = {int(chat) for chat in await self.leases.renew(self.bot, self.holder, self.seconds)}
        for chat_id in before - renewed:
            logger.warning("chat %s is now served by another process: its work here stops", chat_id)
            await self._forget(chat_id)
        now = anyio.current_time()
        for chat_id in self.held:
            if self._busy(chat_id):
                self.held[chat_id] = now
        idle = [chat for chat, seen in self.held.items() if now - seen >= self.idle]
        if idle:
            await self.leases.release(self.bot, self.holder, [str(chat) for chat in idle])
            for chat_id in idle:
                await self._forget(chat_id)
        for chat in await self.leases.orphans(self.bot, self.holder, _ORPHANS_A_SCAN):
            if self._tg is not None and int(chat) not in self.held:
                self._tg.start_soon(self.serve, int(chat))
        await self.leases.prune(self.bot, _KEEP_HANDLED)
        self._elsewhere = {chat: until for chat, until in self._elsewhere.items() if until > now}

    async def _forget(self, chat_id: int) -> None:
        self.held.pop(chat_id, None)
        self._routed.pop(chat_id, None)
        self._locks.forget(chat_id)
        if self._drop is not None:
            await self._drop(chat_id)

    async def release_all(self) -> None:
        """Give up every lease (a graceful stop): other processes take the chats at once."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(5.0):
            try:
                await self.leases.release(self.bot, self.holder)
            except DatabaseError as exc:
                logger.warning("releasing the chats' leases failed (%s); they expire", exc)
        self.held.clear()

    async def lead(self, what: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` while this process is the bot's one process doing ``what`` (polling);
        the others wait, and one takes over within a third of a lease when the leader dies."""
        while True:
            try:
                async with self.leases.leader(self.bot, what) as leadership:
                    if leadership.held:
                        logger.info("this process is the one %s", what)
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(self._watch, leadership, tg.cancel_scope)
                            await work()
                        logger.warning("no longer the one %s: another process takes over", what)
            except DatabaseError as exc:
                logger.warning("the %s leadership failed: %s", what, exc)
            await anyio.sleep(self.seconds / 3)

    async def _watch(self, leadership: Leadership, scope: anyio.CancelScope) -> None:
        while True:
            if not await leadership.check():
                scope.cancel()
                return
            await anyio.sleep(self.seconds / 3)
