"""Scope strings (``console:default``, ``telegram:42``) and the folder names they map to."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

__all__ = ["folder_scope", "scope_folder", "session_state_dir"]

_KEEP = re.compile(r"[A-Za-z0-9-]")
_MAX_PLAIN = 120


def scope_folder(scope: str) -> str:
    """A folder name for a scope: injective, and safe as one path component on any OS.

    Letters, digits and ``-`` stay; every other character, ``_`` included, becomes ``_`` plus
    its UTF-8 bytes in hex. That escape is a prefix code, so two scopes never share a folder,
    and no output holds a separator, a dot, or is empty. A long result is cut and ends in
    ``~`` plus the scope's SHA-256: ``~`` never appears in an escaped name, so a long scope
    cannot collide with a short one.
    """
    if not scope:
        raise ValueError("a session scope cannot be empty")
    escaped = "".join(
        char if _KEEP.fullmatch(char) else "".join(f"_{byte:02x}" for byte in char.encode()) for char in scope
    )
    if len(escaped) <= _MAX_PLAIN:
        return escaped
    digest = hashlib.sha256(scope.encode()).hexdigest()
    return f"{escaped[:48]}~{digest}"


def folder_scope(folder: str) -> str | None:
    """The scope ``scope_folder`` made ``folder`` from; None when it is not one of its names, or a
    long scope's (cut and hashed: its scope cannot be read back)."""
    if "~" in folder:
        return None
    data = bytearray()
    at = 0
    while at < len(folder):
        char = folder[at]
        if char == "_":
            try:
                data.append(int(folder[at + 1 : at + 3], 16))
            except ValueError:
                return None
            at += 3
        elif _KEEP.fullmatch(char):
            data.extend(char.encode())
            at += 1
        else:
            return None
    try:
        scope = data.decode()
    except UnicodeDecodeError:
        return None
    return scope if scope and scope_folder(scope) == folder else None


def session_state_dir(data_dir: Path, scope: str) -> Path:
    """A chat's private folder under the data dir: outside every workspace, the agent cannot reach it."""
    return data_dir / "sessions" / scope_folder(scope)
