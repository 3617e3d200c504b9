"""A Playa host with a single chat, in a process of its own: the scale benchmark's baseline.

``python -m bench._single_chat --url URL`` sets up one chat with servers ``a`` and ``b``, prints
``READY``, then for every line ``N`` on stdin runs N turns and prints their wall times in seconds
as one JSON list. The scale benchmark alternates blocks of turns here with blocks in its own
crowded host, so that the machine's drift hits both alike.
"""

from __future__ import annotations

import argparse
import json
import sys

import anyio

from bench._playa import data_dir, entry, playa_host, timed_echo_turns, write_servers
from playa._runtime import tune_runtime
from playa.mcp_remote import RemoteMcpSettings


async def serve(url: str) -> None:
    with data_dir() as data:
        scope = "console:single"
        write_servers(data, scope, [entry("a", url), entry("b", url)])
        async with playa_host(data, RemoteMcpSettings()) as (host, extension):
            session = await host.session(scope, owner="owner")
            await extension.chat(session).wait_for_connects()
            await timed_echo_turns(host, session, 10)  # warm up
            print("READY", flush=True)
            while line := await anyio.to_thread.run_sync(sys.stdin.readline):
                print(json.dumps(await timed_echo_turns(host, session, int(line))), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    tune_runtime()  # as the `playa` command runs
    anyio.run(serve, parser.parse_args().url)


if __name__ == "__main__":
    main()
