"""Memory: many chats held by one process against the same chats spread over three processes.

Real ``playa telegram`` processes of one bot on PostgreSQL (see ``bench._bots``), by webhook,
with sessions kept open (``PLAYA_SESSION_IDLE=never``: no chat is released while measured).
Each chat gets one message, answered by the offline model. First one process receives every
chat; then three new processes each receive a third of as many other chats (a load balancer
spreading them). Once every chat is answered, each process's resident set (``VmRSS``) is read,
and its ``/metrics`` must count the chats it holds. The figures: each of the three against a
third of the one, as resident sets and as growth over the same process warm (started, webhook
registered, one chat of its own answered: the first turn's imports are no chat's cost; each
process's idle figure, before that chat, is in the notes). Target: each a third, ±20 %.

``python -m bench.bench_spread --chats N`` runs another size; ``./dev bench`` runs 10,000.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import anyio

from bench._bots import Bot, Fleet, fleet, rss_of
from bench._common import Report, verdict

CHATS = 10_000
QUICK_CHATS = 300
SPREAD = 3
TOLERANCE = 0.2
POSTS_AT_ONCE = 16
FIRST_CHAT = 1_000_000


async def _warm(bots: Fleet, bot: Bot) -> int:
    """``bot``'s RSS once it answered one chat of its own: the first turn's imports and caches
    (the model library, the agent) are paid once per process, whatever the number of chats."""
    chat = bot.port  # a chat of this process's own, apart from the measured ones
    await _serve(bots, {chat: bot}, timeout=120)
    return rss_of(bot.pid)


async def _serve(bots: Fleet, chats: dict[int, Bot], timeout: float) -> float:
    """Post one message in each chat to its process; the seconds until every chat was answered."""
    began = anyio.current_time()
    limiter = anyio.CapacityLimiter(POSTS_AT_ONCE)

    async def post(chat: int, bot: Bot) -> None:
        async with limiter:
            await bots.post(bot, chat, "hello")

    async with anyio.create_task_group() as tg:
        for chat, bot in chats.items():
            tg.start_soon(post, chat, bot)
    await bots.replies(set(chats), timeout=timeout)
    return anyio.current_time() - began


@dataclass(frozen=True)
class Measured:
    """Resident sets in bytes, and the seconds each side took to answer its chats."""

    count: int
    share: int
    idle: int
    warm: int
    one: int
    spread_idle: list[int]
    spread_warm: list[int]
    spread: list[int]
    held: list[int]
    """The sessions each of the three holds open."""
    one_seconds: float
    spread_seconds: float


async def measure(count: int) -> Measured:
    """The idle process, one holding ``count`` chats, and three holding a third as many each."""
    timeout = 600 + count * 0.5  # a busy two-core machine: a turn well under 50 ms is not assured
    share = count // SPREAD
    async with fleet(lease_seconds=15.0, session_idle="never") as bots:
        one = await bots.start()
        idle = rss_of(one.pid)
        warm = await _warm(bots, one)
        one_seconds = await _serve(bots, {FIRST_CHAT + n: one for n in range(count)}, timeout)
        if (held := await bots.held(one)) != count + 1:
            raise RuntimeError(f"one process holds {held} sessions, not {count}")
        one_rss = rss_of(one.pid)
        one.kill()
        spread = [await bots.start() for _ in range(SPREAD)]
        idles = [rss_of(bot.pid) for bot in spread]
        warms = [await _warm(bots, bot) for bot in spread]
        first = FIRST_CHAT + count
        chats = {first + n: spread[n % SPREAD] for n in range(share * SPREAD)}
        spread_seconds = await _serve(bots, chats, timeout)
        # A chat nobody holds yet may be taken by another process's scan before the one it was
        # posted to takes it: a share can be off by a few chats, their sum cannot.
        helds = [await bots.held(bot) for bot in spread]
        helds = [held - 1 for held in helds]  # the warm-up chat each
        if sum(helds) != share * SPREAD:
            raise RuntimeError(f"the three processes hold {helds} sessions, not {share * SPREAD}")
        rss = [rss_of(bot.pid) for bot in spread]
    return Measured(count, share, idle, warm, one_rss, idles, warms, rss, helds, one_seconds, spread_seconds)


def _mb(value: float) -> str:
    return f"{value / 2**20:.1f} MB"


def report_of(m: Measured) -> Report:
    low, high = 1 - TOLERANCE, 1 + TOLERANCE
    report = Report("spread", f"{m.count:,} chats: one process vs spread over {SPREAD} (memory)")
    report.add(f"one process, {m.count:,} chats: RSS", _mb(m.one), f"{_mb(m.idle)} idle")
    report.add("one process: RSS − warm", _mb(m.one - m.warm), f"{_mb(m.warm)} warm")
    rows = zip(m.spread, m.spread_warm, m.held, strict=True)
    for number, (rss, warm, held) in enumerate(rows, start=1):
        ratio = rss / (m.one / SPREAD)
        report.add(
            f"process {number} of {SPREAD}, {held:,} chats: RSS",
            _mb(rss),
            f"{_mb(m.one / SPREAD)} (a third of one)",
            ratio=f"{ratio:.2f}",
            target=f"{low:.1f}–{high:.1f}",
            verdict=verdict(low <= ratio <= high),
        )
        third = (m.one - m.warm) / SPREAD
        ratio = (rss - warm) / third
        report.add(
            f"process {number} of {SPREAD}: RSS − warm",
            _mb(rss - warm),
            f"{_mb(third)} (a third of one's)",
            ratio=f"{ratio:.2f}",
            target=f"{low:.1f}–{high:.1f}",
            verdict=verdict(low <= ratio <= high),
        )
    per_chat = (m.one - m.warm) / m.count
    report.notes.append(
        f"Every chat one message to the offline model, answered, its session kept open (each "
        f"process's /metrics counted them); by webhook, {POSTS_AT_ONCE} posts at once; PostgreSQL "
        f"durable. Idle: a process started, its webhook registered, no chat ({_mb(m.idle)}; the "
        f"three: {', '.join(_mb(v) for v in m.spread_idle)}). Warm: the same after one chat of its "
        f"own answered, the first turn's imports and caches paid ({_mb(m.warm)}; the three: "
        f"{', '.join(_mb(v) for v in m.spread_warm)}). One held chat: {per_chat / 1024:.0f} KB."
    )
    report.notes.append(
        f"Answered in {m.one_seconds:.0f} s by one process ({m.count / m.one_seconds:.0f} chats/s), "
        f"{m.spread_seconds:.0f} s by three ({sum(m.held) / m.spread_seconds:.0f} chats/s), on "
        "this machine's two cores shared with PostgreSQL and the fake Bot API."
    )
    return report


async def run(quick: bool) -> Report:
    return report_of(await measure(QUICK_CHATS if quick else CHATS))


if __name__ == "__main__":
    from bench.__main__ import print_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=CHATS)
    chats = parser.parse_args().chats
    print_report(report_of(anyio.run(measure, chats)))
