"""Scope strings (``console:default``, ``telegram:42``) and the folder names they map to."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

__all__ = ["scope_folder", "session_state_dir"]

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


def session_state_dir(data_dir: Path, scope: str) -> Path:
    """A chat's private folder under the data dir: outside every workspace, the agent cannot reach it."""
    return data_dir / "sessions" / scope_folder(scope)
