"""Failover: the first reply in a chat whose process was killed, against the lease that bounds it.

Real ``playa telegram`` processes of one bot on PostgreSQL (see ``bench._bots``), by webhook.
A trial: the chat was answered by process A, which holds its lease; A is killed with SIGKILL
(its lease is neither released nor renewed again); the chat's next message is posted to
process B, as a load balancer would send it once A stopped answering; measured: from the kill
to B's reply in the chat. B commits the message, finds the chat held, and takes it over at its
first scan (every third of a lease) after A's lease ran out, so the figure is at most the lease
plus a third of it plus a turn; how much of the lease is left at the kill depends on where the
kill falls in A's renewal (every third of a lease), so each trial kills at another point of it.
The killed process is started again and the roles swap for the next trial.

Run with the default ``PLAYA_LEASE_SECONDS`` (15) and with a short lease (5), to show the
relation. Target: the slowest first reply within ``PLAYA_LEASE_SECONDS`` + 2 s.
"""

from __future__ import annotations

import statistics
import time

import anyio

from bench._bots import fleet
from bench._common import Report, Spread, verdict

LEASES = (15.0, 5.0)
SLACK = 2.0
CHAT = 4711
STOP_TIMEOUT = 30.0


async def trials(lease: float, count: int) -> list[float]:
    """Seconds from each kill to the next reply in the chat, ``count`` kills with lease ``lease``."""
    times: list[float] = []
    async with fleet(lease_seconds=lease) as bots:
        first, second = await bots.start(), await bots.start()
        await bots.post(first, CHAT, "hello")
        await bots.replies({CHAT}, timeout=120)
        for trial in range(count):
            # A chat nobody held may be taken by either: the one whose scan saw it first.
            holder, other = (first, second) if await bots.held(first) else (second, first)
            if await bots.held(holder) != 1:
                raise RuntimeError("neither process holds the chat it answered")
            # Not a synchronization: it moves the kill to another point of the holder's renewal,
            # never right on a reply (a reply sent and not yet marked delivered is sent again).
            await anyio.sleep(lease / 3 * (trial + 0.5) / count)
            holder.kill()
            killed = time.monotonic()
            await bots.post(other, CHAT, f"hello after kill {trial}")
            # Anything the chat got before the kill (a late part of the last reply) is not it.
            came = await bots.replies({CHAT}, timeout=lease * 3 + 60, since=killed)
            times.append(came[CHAT] - killed)
            with anyio.fail_after(STOP_TIMEOUT):
                await holder.process.wait()
            first, second = other, await bots.start()
    return times


async def run(quick: bool) -> Report:
    count = 1 if quick else 4
    report = Report("failover", "The first reply in a chat after its process was killed (SIGKILL)")
    chart: dict[str, Spread] = {}
    for lease in LEASES:
        times = await trials(lease, count)
        worst, bound = max(times), lease + SLACK
        spread = Spread.of(times)
        chart[f"lease {lease:g} s"] = spread
        report.add(
            f"kill → first reply, lease {lease:g} s: median (min–max)",
            f"{statistics.median(times):.1f} s ({min(times):.1f}–{worst:.1f}, n={len(times)})",
            f"{lease:g} s lease",
            ratio=f"{worst / lease:.2f}",
            target=f"≤ {bound:g} s",
            verdict=verdict(worst <= bound),
        )
    report.notes.append(
        f"{count} kill(s) per lease, each at another point of the holder's renewal (every third of a "
        "lease); two `playa telegram` processes by webhook on one PostgreSQL; the next message is "
        "posted to the survivor right after the kill; offline model. The ratio is the slowest "
        "reply over the lease. A takeover waits for the lease to run out (2/3 to all of a lease "
        "after the kill: it was renewed every third), then for the survivor's next scan (up to a "
        "third more): 4/3 of a lease and a turn at worst."
    )
    report.chart = chart
    return report


if __name__ == "__main__":
    from bench.__main__ import print_report

    print_report(anyio.run(run, False))
