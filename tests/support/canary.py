"""What the real-process canary suites share: a `playa chat` run, the keys an owner sends
carelessly, and the oracle over everything a run sent, logged, printed and left in files."""

from __future__ import annotations

import functools
import math
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from support.leaks import leaks
from support.providers import ProviderServer

__all__ = [
    "GHP",
    "HOST_SECRET",
    "IN_PROSE",
    "LOW_HEX",
    "WAIT",
    "ChatRun",
    "Console",
    "Leaked",
    "assert_nothing_leaked",
    "console_environment",
    "console_process",
    "files_under",
    "leaked_of",
    "low_entropy_hex",
    "run_chat",
]

HOST_SECRET = "canary-host-secret-" + "s" * 20
WAIT = 60.0
"""How long a suite waits for one thing a real process should do: generous, on a busy machine."""

Leaked = Callable[[bytes | str], list[str]]
"""What a text shows of a suite's credentials."""


def low_entropy_hex() -> str:
    """A random 32-digit hex key under 3.5 bits a character: a fifth of them are."""
    while True:
        key = uuid.uuid4().hex
        counts = Counter(key)
        if -sum(n / 32 * math.log2(n / 32) for n in counts.values()) < 3.5:
            return key


GHP = "ghp_" + uuid.uuid4().hex + "Zq"
"""A key of a well-known format."""
LOW_HEX = low_entropy_hex()
"""A key that only the entropy floor tells from a name."""
IN_PROSE = "github_pat_11" + uuid.uuid4().hex.upper() + "_" + uuid.uuid4().hex
"""A key for a sentence."""


def leaked_of(credentials: str | Iterable[str]) -> Leaked:
    """The oracle for ``credentials``: what a text shows of any of them, a piece of one included."""
    return functools.partial(
        leaks, credentials if isinstance(credentials, str) else tuple(credentials), pieces=True
    )


def files_under(folder: Path) -> list[tuple[Path, bytes]]:
    """Every file below ``folder``, with its bytes: the oracle reads them all."""
    return [(path, path.read_bytes()) for path in folder.rglob("*") if path.is_file()]


def assert_nothing_leaked(
    leaked: Leaked,
    *,
    provider: ProviderServer | None = None,
    sent: Iterable[tuple[object, bytes | str]] = (),
    logs: Iterable[str] = (),
    folder: Path | None = None,
) -> None:
    """The oracle over a whole run: every request body ``provider`` received, each of ``sent`` (what
    to show if it leaks, and the data sent), every line of ``logs`` (a log, a console's output) and
    every file below ``folder``."""
    for request in provider.requests if provider is not None else []:
        assert leaked(request.raw) == [], request.raw[:2000]
    for shown, data in sent:
        assert leaked(data) == [], shown
    for log in logs:
        assert leaked(log) == [], [line for line in log.splitlines() if leaked(line)][:5]
    for path, data in files_under(folder) if folder is not None else []:
        assert leaked(data) == [], path


def console_environment(level: str, env: Mapping[str, str] = {}) -> dict[str, str]:
    """The environment of a `playa chat` run: none of the operator's own Playa, MCP or provider
    settings, the canary host secret, the log ``level`` and a connect timeout for a busy machine."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PLAYA_", "MCP_", "OPENAI_"))},
        "OPENAI_API_KEY": "test-provider-key",
        "MCP_ENCRYPTION_SECRET": HOST_SECRET,
        "PLAYA_LOG_LEVEL": level,
        "PLAYA_CONNECT_TIMEOUT": "20",
        **env,
    }


def _console_command(data_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "playa",
        "chat",
        "--data-dir",
        str(data_dir),
        "--model",
        "openai-chat:gpt-5.5",
    ]


@dataclass(frozen=True)
class ChatRun:
    """What a `playa chat` run printed, and what it logged."""

    out: str
    err: str


async def run_chat(
    data_dir: Path,
    provider: ProviderServer,
    lines: list[str],
    level: str,
    env: Mapping[str, str] = {},
) -> ChatRun:
    """``playa chat`` in a process of its own, its model the loopback ``provider``, fed ``lines``;
    it must end well."""
    done = await anyio.to_thread.run_sync(functools.partial(_run_chat, data_dir, provider, lines, level, env))
    run = ChatRun(done.stdout.decode(), done.stderr.decode())
    assert done.returncode == 0, run.err[-3000:]
    return run


def _run_chat(
    data_dir: Path, provider: ProviderServer, lines: list[str], level: str, env: Mapping[str, str]
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        _console_command(data_dir),
        input="".join(line + "\n" for line in lines).encode(),
        capture_output=True,
        timeout=240,
        env=console_environment(level, {"OPENAI_BASE_URL": provider.url, **env}),
        check=False,
    )


class Console:
    """A ``playa chat`` process: lines in, and its stdout gathered, waited on by content."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.out = ""
        self._grew = anyio.Event()

    async def read(self) -> None:
        assert self.process.stdout is not None
        async for chunk in TextReceiveStream(self.process.stdout):
            self.out += chunk
            self._grew.set()
            self._grew = anyio.Event()

    async def say(self, line: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((line + "\n").encode())

    async def wait_for(self, pattern: str, *, after: int = 0) -> re.Match[str]:
        with anyio.fail_after(WAIT):
            while (found := re.compile(pattern, re.MULTILINE).search(self.out, after)) is None:
                await self._grew.wait()
        return found

    async def end(self) -> int:
        """Close the console's input, as the owner's end of input does, and its exit status."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        with anyio.fail_after(WAIT):
            return await self.process.wait()


@asynccontextmanager
async def console_process(
    data_dir: Path, provider: ProviderServer, stderr: Path, env: Mapping[str, str] = {}
) -> AsyncIterator[Console]:
    """``playa chat`` running at DEBUG, its model the loopback ``provider``, its log in ``stderr``;
    its output is read as it comes."""
    environment = console_environment("DEBUG", {"OPENAI_BASE_URL": provider.url, **env})
    with stderr.open("wb") as log:
        process = await anyio.open_process(_console_command(data_dir), env=environment, stderr=log)
        async with process, anyio.create_task_group() as tg:
            console = Console(process)
            tg.start_soon(console.read)
            yield console
