"""The host secret that seals every chat's server file, and where it comes from.

In order: ``MCP_ENCRYPTION_SECRET``; else ``TELEGRAM_BOT_TOKEN``; else, only when the caller
allows it (the console, which has no token), 32 random bytes generated once into
``<data_dir>/secret.key``. The data dir holds the workspaces in sub-folders, so the key file
is outside every workspace and the agent's file tools cannot read it. Both variables must be
on the host's environment deny-list.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from ..._files import create_durably
from ._seal import MIN_SECRET_BYTES

__all__ = [
    "ENV_BOT_TOKEN",
    "ENV_SECRET",
    "KEY_FILE_NAME",
    "HostSecret",
    "NoHostSecret",
    "SecretSource",
    "resolve_host_secret",
]

ENV_SECRET: Final = "MCP_ENCRYPTION_SECRET"
ENV_BOT_TOKEN: Final = "TELEGRAM_BOT_TOKEN"
KEY_FILE_NAME: Final = "secret.key"
_GENERATED_BYTES: Final = 32

SecretSource = Literal["MCP_ENCRYPTION_SECRET", "TELEGRAM_BOT_TOKEN", "generated"]


@dataclass(frozen=True)
class HostSecret:
    """The secret bytes (never in ``repr``) and which source they came from."""

    value: bytes = field(repr=False)
    source: SecretSource


@dataclass(frozen=True)
class NoHostSecret:
    """No usable host secret: remote MCP is disabled, and ``reason`` says how to enable it."""

    reason: str


def resolve_host_secret(
    env: Mapping[str, str], *, data_dir: Path, allow_generate: bool
) -> HostSecret | NoHostSecret:
    """Find the host secret, generating the console's key file on first use if allowed.

    An empty variable counts as unset. A variable that is set but too short is refused
    rather than skipped: the operator chose it, and silently using another source would
    seal entries with a key they do not expect.
    """
    for name in (ENV_SECRET, ENV_BOT_TOKEN):
        text = env.get(name, "")
        if not text:
            continue
        # os.environ decodes undecodable bytes with surrogateescape; this gets them back.
        value = text.encode("utf-8", "surrogateescape")
        if len(value) < MIN_SECRET_BYTES:
            return NoHostSecret(f"{name} is too short: use at least {MIN_SECRET_BYTES} characters")
        source: SecretSource = "MCP_ENCRYPTION_SECRET" if name == ENV_SECRET else "TELEGRAM_BOT_TOKEN"
        return HostSecret(value, source)
    if not allow_generate:
        return NoHostSecret(f"set {ENV_SECRET} (or {ENV_BOT_TOKEN}) to enable remote MCP servers")
    return _key_file(data_dir / KEY_FILE_NAME)


def _key_file(path: Path) -> HostSecret | NoHostSecret:
    result = _read_key_file(path)
    if result is not None:
        return result
    try:
        _create_key_file(path)
    except FileExistsError:
        pass  # another process won the race; its key is the one to use
    except OSError as exc:
        return NoHostSecret(f"cannot create {path}: {exc.strerror}; or set {ENV_SECRET}")
    return _read_key_file(path) or NoHostSecret(f"{path} vanished while it was being created")


def _read_key_file(path: Path) -> HostSecret | NoHostSecret | None:
    """The key in ``path``; None when there is no such file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return NoHostSecret(f"cannot read {path}: {exc.strerror}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return NoHostSecret(f"{path} is not a regular file")
        if st.st_uid != os.geteuid():
            return NoHostSecret(f"{path} belongs to another user")
        if st.st_mode & 0o077:
            mode = stat.S_IMODE(st.st_mode)
            return NoHostSecret(f"{path} has mode {mode:04o}; it must be 0600 (chmod 600 {path})")
        if st.st_size != _GENERATED_BYTES:
            return NoHostSecret(
                f"{path} is {st.st_size} bytes, not {_GENERATED_BYTES}; delete it to generate a new key "
                "(servers sealed with the old key must then be added again)"
            )
        value = os.read(fd, _GENERATED_BYTES + 1)
    except OSError as exc:
        return NoHostSecret(f"cannot read {path}: {exc.strerror}")
    finally:
        os.close(fd)
    if len(value) != _GENERATED_BYTES:
        return NoHostSecret(f"{path} changed while it was read")
    return HostSecret(value, "generated")


def _create_key_file(path: Path) -> None:
    """Create ``path`` with fresh random bytes; FileExistsError if it already exists."""
    os.makedirs(path.parent, mode=0o700, exist_ok=True)
    # Created whole or not at all, and by one process only: two would seal with two keys.
    create_durably(path, os.urandom(_GENERATED_BYTES), mode=0o600)
