"""A chat's audit log as rows of a database (the core's ``AuditRows``), the same records as the file's.

Each row holds a record's line as the file would (without its newline), and the head row the
file's head record: chained, MACed and sealed alike, so one verifier checks both
(``verify_chain``) and nothing in a row is secret. What the file cannot do, the rows do: the
records of a batch and the head that names the last of them are written in one transaction,
and only over the head the writer read. Two processes that both think they hold the chat (a
lease just moved) cannot interleave the chain: the one whose head is gone reads the head again
and chains its records after the other's. A head that went back under the writer (put back by
hand, or from a backup) is said in the chain itself, as a lost head is in the file.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ...core import AuditRows
from ._audit_chain import (
    GENESIS,
    AuditKey,
    AuditRecord,
    Batch,
    ChainEnd,
    Head,
    chains_to,
    good_records,
    moved,
    open_head,
    sealed_head,
    verified,
)
from ._audit_verify import Verification, verify_chain

__all__ = ["AuditRaced", "RowWriter", "latest_rows", "log_rows", "move_rows", "verify_rows"]

logger = logging.getLogger(__name__)

_TRIES: Final = 8
"""Appends raced and lost in a row before a batch is given up: each loss is another writer's
batch written, so this many means a writer that never stops, not a chain that cannot go on."""


class AuditRaced(Exception):
    """Other writers' appends kept landing first: the batch was not written."""


def _row(record: AuditRecord) -> tuple[int, bytes]:
    """A record's row: its sequence number, and its line as the file holds it, without the newline."""
    return record.seq, record.line().rstrip(b"\n")


def log_rows(
    records: Sequence[AuditRecord], scope: str, key: AuditKey
) -> tuple[bytes, list[tuple[int, bytes]]]:
    """The head and rows of a verified log of ``records`` (``playa db import``): the head names the
    last record, as an append's does."""
    last = records[-1]
    return sealed_head(Head(last.seq, last.hash), scope, key), [_row(record) for record in records]


@dataclass
class RowWriter(ChainEnd):
    """The chain's end in the rows of chat ``chat`` (its records sealed for ``scope``)."""

    rows: AuditRows
    chat: str = ""
    _known: bytes | None = None

    def __post_init__(self) -> None:
        self.chat = self.chat or self.scope

    async def resume(self) -> tuple[int, str]:
        """Where the chain goes on: the head's record, or a later one the head does not name."""
        data, tail = await self.rows.last(self.chat, 1)
        self._known = data
        head = open_head(data, self.scope, self.key) if data is not None else None
        last_seq = tail[-1][0] if tail else 0
        last_hash = chains_to(tail[-1][1]) if tail else GENESIS
        if isinstance(head, Head):
            if last_seq <= head.seq:
                return head.seq, head.hash
            # Records after the head: only a head put back does that (they are written together).
            self.head_lost(
                f"the head record named record {head.seq}, the log goes on to {last_seq}", last_seq
            )
        elif tail:
            self.head_lost(head or "missing", last_seq)
        return last_seq, last_hash

    async def append(self, batch: Batch) -> None:
        """Chain and seal ``batch`` after the chat's last record, and write it with its head."""
        for _ in range(_TRIES):
            if self.last is None:
                self.last = await self.resume()
            sealed = self.seal(batch)
            if not sealed.records:
                return
            rows = [_row(record) for record in sealed.records]
            if await self.rows.append(self.chat, self._known, rows, sealed.head):
                self.went_on(sealed)
                self._known = sealed.head
                return
            # Another writer's head is there: read it, and chain the batch after its records.
            was, self.last, self.found = self.last, None, []
            now_at = await self.resume()
            if now_at[0] < was[0] or (now_at[0] == was[0] and now_at[1] != was[1]):
                # Behind what this writer wrote itself: the head was put back, which is no race.
                why = f"the head went back from record {was[0]} to {now_at[0]}"
                logger.error("the audit log of %s: %s", self.chat, why)
                self.head_lost(why, now_at[0])
            self.last = now_at
        raise AuditRaced(f"other writers' appends came first {_TRIES} times")


async def latest_rows(
    rows: AuditRows, scope: str, key: AuditKey, count: int
) -> list[tuple[AuditRecord, bool]]:
    """The last ``count`` records that parse, in order, each with whether its MAC verifies."""
    _, found = await rows.last(scope, count)
    return verified(list(good_records(data for _, data in found)), scope, key)


async def verify_rows(rows: AuditRows, scope: str, key: AuditKey) -> Verification:
    """Check the chat's log in the rows against its head: every edit, gap, renumbering, cut or rollback."""
    data, found = await rows.read(scope)
    head = open_head(data, scope, key) if data is not None else None
    return verify_chain(found, head, scope, key, rows=True)


async def move_rows(rows: AuditRows, old_scope: str, new_scope: str, key: AuditKey) -> bool:
    """The chat's scope changed: its rows become the new scope's, and the chain goes on under it
    with a ``chat_moved`` record naming the old one. False when the new scope has a log of its own
    (nothing moved)."""
    if not await rows.move(old_scope, new_scope):
        logger.warning("the audit log of %s stays: %s has one of its own", old_scope, new_scope)
        return False
    writer = RowWriter(old_scope, key, rows, chat=new_scope)
    writer.last = await writer.resume()
    if writer.last == (0, GENESIS):
        return True  # no log to go on with
    if writer.found:
        await writer.append([])  # what the resume found goes first, sealed for the old scope
    writer.scope = new_scope
    await writer.append(moved(old_scope))
    return True
