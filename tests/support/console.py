"""The real ``playa chat``, fed its lines through a pipe: what the console tests run."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from support.canary import console_environment
from support.leaks import leaks
from support.oauth import every_file

__all__ = ["added_in_secret", "assert_nothing_leaks", "chat", "debug_chat"]


def chat(
    data_dir: Path,
    lines: Sequence[str],
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``playa chat`` on ``data_dir`` with ``args``: each of ``lines`` typed, then the end of input.
    ``env`` is its whole environment (this process's when not given)."""
    return subprocess.run(
        [sys.executable, "-m", "playa", "chat", "--data-dir", str(data_dir), *args],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ) if env is None else dict(env),
        check=False,
    )


async def debug_chat(data_dir: Path, lines: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``chat`` in a worker thread, logging at DEBUG, with loopback servers allowed."""

    def run() -> subprocess.CompletedProcess[str]:
        env = console_environment("DEBUG", {"PLAYA_EGRESS_ALLOW": "127.0.0.1/32"})
        return chat(data_dir, lines, env=env, timeout=90)

    return await anyio.to_thread.run_sync(run)


async def added_in_secret(
    data_dir: Path, name: str, add: str, answer: str, *, asked: str, whoami: str
) -> subprocess.CompletedProcess[str]:
    """``debug_chat`` that adds server ``name`` with the command ``add``, answers the secret question
    that says ``asked`` with ``answer``, and calls the server's ``whoami``: the run, checked to have
    connected, to have been answered ``whoami``, and to have logged at DEBUG."""
    done = await debug_chat(data_dir, [add, answer, f"{name}__whoami"])
    assert done.returncode == 0, done.stderr
    assert asked in done.stdout
    assert f"Added {name}: connected" in done.stdout, done.stdout
    assert f"{name}__whoami returned:\n{whoami}" in done.stdout
    assert "HTTP Request" in done.stderr  # the DEBUG log is there to be searched
    return done


def assert_nothing_leaks(done: subprocess.CompletedProcess[str], data_dir: Path, secrets: list[str]) -> None:
    """No form of ``secrets`` in the run's output, its log or a file under ``data_dir``."""
    for where, text in {"stdout": done.stdout, "stderr": done.stderr, **every_file(data_dir)}.items():
        assert leaks(secrets, text) == [], where
