"""A chat's server store as the store's tests use it: a sealer, three entries of every kind, and
the file read and edited as raw JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playa.mcp_remote.store import LoadResult, Sealer, ServerEntry, ServerStore

CANARY = "canary-5d1e0a77-header-value"
SCOPE = "telegram:123"
SEALER = Sealer(b"k" * 32)

DOCS = ServerEntry(
    "docs", "https://docs.example/mcp", "auto", None, "bearer", {"Authorization": f"Bearer {CANARY}"}
)
WIKI = ServerEntry(
    "wiki",
    "http://127.0.0.1:8000/mcp",
    "streamable-http",
    ("search", "read"),
    "headers",
    {"X-Api-Key": CANARY},
)
OPEN = ServerEntry("open", "https://open.example/sse", "sse", (), "none", {})
ALL = (DOCS, WIKI, OPEN)
NEW = ServerEntry("new", "https://new.example/")
FORGED = "seal does not verify: entry was edited, moved or forged"


def warning_of(store: ServerStore) -> str:
    """What a load says of a file it cannot use at all (it finds no entry in it)."""
    result = store.load()
    assert result.entries == ()
    assert result.warning is not None
    return result.warning


def new_store(workspace: Path, scope: str = SCOPE, sealer: Sealer = SEALER) -> ServerStore:
    return ServerStore(workspace, scope, sealer)


def doc_of(store: ServerStore) -> dict[str, Any]:
    return json.loads(store.path.read_text())  # type: ignore[no-any-return]


def write_doc(store: ServerStore, doc: object) -> None:
    store.path.write_text(json.dumps(doc))


def edit(store: ServerStore, change: Callable[[list[dict[str, Any]]], None]) -> None:
    doc = doc_of(store)
    change(doc["servers"])
    write_doc(store, doc)


def reasons(result: LoadResult) -> dict[str | None, str]:
    return {r.name: r.reason for r in result.rejected}


def private_store(tmp_path: Path) -> ServerStore:
    """A store that keeps its copy and record in a private folder beside the workspace."""
    return ServerStore(tmp_path / "ws", SCOPE, SEALER, state_dir=tmp_path / "state")
