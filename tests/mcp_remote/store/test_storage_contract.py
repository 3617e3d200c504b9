"""The server store's contract, run against both backends: the sealed file and PostgreSQL rows.

Whatever holds a chat's servers, an entry changed, moved to another chat or rolled back is
never used, two writers lose nothing, and no credential is stored in clear.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import anyio
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from playa.db import Database, DatabaseStorage, DatabaseUrl, upgrade
from playa.exceptions import StoreError
from playa.mcp_remote.store import (
    FileServers,
    LoadResult,
    OAuthGrant,
    Pins,
    Policy,
    RowMemory,
    RowServers,
    ServerEntry,
    ServerStorage,
    ServerStore,
    resource_of,
    store_path,
)
from support.postgres import database_url, postgres
from support.store import ALL, CANARY, DOCS, NEW, OPEN, SCOPE, SEALER, WIKI

__all__ = ["database_url", "postgres"]

pytestmark = pytest.mark.anyio

OTHER = "telegram:456"


class Backend(Protocol):
    """One way of keeping a chat's servers, and an attacker's hands on what it keeps."""

    def store(self, scope: str = SCOPE) -> ServerStorage: ...

    def restarted(self) -> None:
        """Forget what the process remembered (a new process over the same state)."""

    async def snapshot(self, scope: str = SCOPE) -> object: ...

    async def put_back(self, snapshot: object, scope: str = SCOPE) -> None:
        """Put back the whole stored state of a snapshot (record included, where one is kept)."""

    async def put_back_entry(self, snapshot: object, name: str, scope: str = SCOPE) -> None:
        """Put back one entry as the snapshot held it, the rest left as they are."""

    async def edit_url(self, name: str, url: str, scope: str = SCOPE) -> None: ...

    async def move(self, name: str, source: str, target: str) -> None:
        """Move an entry's stored form from one chat to another."""

    async def stored_bytes(self) -> bytes:
        """Everything the backend stores, as bytes (every file, every table's text)."""


class Files:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _paths(self, scope: str) -> tuple[Path, Path]:
        folder = self.root / scope.replace(":", "_")
        return folder / "ws", folder / "state"

    def store(self, scope: str = SCOPE) -> ServerStorage:
        workspace, state = self._paths(scope)
        return FileServers(ServerStore(workspace, scope, SEALER, state_dir=state))

    def restarted(self) -> None:
        pass  # the file backend's record is on disk already

    def _file(self, scope: str) -> Path:
        return store_path(self._paths(scope)[0])

    def _doc(self, scope: str) -> dict[str, Any]:
        return json.loads(self._file(scope).read_bytes())  # type: ignore[no-any-return]

    async def snapshot(self, scope: str = SCOPE) -> object:
        return self._file(scope).read_bytes()

    async def put_back(self, snapshot: object, scope: str = SCOPE) -> None:
        assert isinstance(snapshot, bytes)
        self._file(scope).write_bytes(snapshot)

    async def put_back_entry(self, snapshot: object, name: str, scope: str = SCOPE) -> None:
        assert isinstance(snapshot, bytes)
        old = next(e for e in json.loads(snapshot)["servers"] if e["name"] == name)
        doc = self._doc(scope)
        doc["servers"] = [e for e in doc["servers"] if e["name"] != name] + [old]
        self._file(scope).write_text(json.dumps(doc))

    async def edit_url(self, name: str, url: str, scope: str = SCOPE) -> None:
        doc = self._doc(scope)
        next(e for e in doc["servers"] if e["name"] == name)["url"] = url
        self._file(scope).write_text(json.dumps(doc))

    async def move(self, name: str, source: str, target: str) -> None:
        moved = next(e for e in self._doc(source)["servers"] if e["name"] == name)
        doc = self._doc(target)
        doc["servers"].append(moved)
        self._file(target).write_text(json.dumps(doc))

    async def stored_bytes(self) -> bytes:
        return b"".join(p.read_bytes() for p in sorted(self.root.rglob("*")) if p.is_file())


@dataclass(frozen=True)
class RowsSnapshot:
    generation: int
    record: bytes | None
    rows: list[tuple[str, int, bytes]]


class Rows:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.storage = DatabaseStorage(database)
        self.memory = RowMemory()

    def store(self, scope: str = SCOPE) -> ServerStorage:
        return RowServers(self.storage.servers, scope, SEALER, self.memory)

    def restarted(self) -> None:
        self.memory = RowMemory()

    async def snapshot(self, scope: str = SCOPE) -> object:
        async with self.database.connection() as c:
            head = await c.fetchrow("SELECT generation, record FROM server_stores WHERE chat = $1", scope)
            rows = await c.fetch("SELECT name, generation, entry FROM servers WHERE chat = $1", scope)
        assert head is not None
        return RowsSnapshot(
            head["generation"], head["record"], [(r["name"], r["generation"], r["entry"]) for r in rows]
        )

    async def put_back(self, snapshot: object, scope: str = SCOPE) -> None:
        assert isinstance(snapshot, RowsSnapshot)
        generation, record, rows = snapshot.generation, snapshot.record, snapshot.rows
        async with self.database.transaction() as c:
            await c.execute("DELETE FROM servers WHERE chat = $1", scope)
            await c.execute(
                "UPDATE server_stores SET generation = $2, record = $3 WHERE chat = $1",
                scope,
                generation,
                record,
            )
            await c.executemany(
                "INSERT INTO servers (chat, name, generation, entry) VALUES ($1, $2, $3, $4)",
                [(scope, *row) for row in rows],
            )

    async def put_back_entry(self, snapshot: object, name: str, scope: str = SCOPE) -> None:
        assert isinstance(snapshot, RowsSnapshot)
        _, generation, entry = next(r for r in snapshot.rows if r[0] == name)
        async with self.database.connection() as c:
            await c.execute(
                "UPDATE servers SET generation = $3, entry = $4 WHERE chat = $1 AND name = $2",
                scope,
                name,
                generation,
                entry,
            )

    async def edit_url(self, name: str, url: str, scope: str = SCOPE) -> None:
        async with self.database.connection() as c:
            entry = await c.fetchval("SELECT entry FROM servers WHERE chat = $1 AND name = $2", scope, name)
            raw = json.loads(entry)
            raw["url"] = url
            await c.execute(
                "UPDATE servers SET entry = $3 WHERE chat = $1 AND name = $2",
                scope,
                name,
                json.dumps(raw).encode(),
            )

    async def move(self, name: str, source: str, target: str) -> None:
        async with self.database.connection() as c:
            await c.execute(
                "UPDATE servers SET chat = $3 WHERE chat = $1 AND name = $2", source, name, target
            )

    async def stored_bytes(self) -> bytes:
        parts: list[bytes] = []
        async with self.database.connection() as c:
            tables = await c.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            for table in tables:
                # Every column of every row as text (bytea as its escaped bytes, which keep ASCII).
                rows = await c.fetch(f'SELECT t::text AS row FROM "{table["tablename"]}" t')
                parts.extend(row["row"].encode() for row in rows)
                for row in await c.fetch(f'SELECT * FROM "{table["tablename"]}"'):
                    parts.extend(v for v in row.values() if isinstance(v, bytes))
        return b"\n".join(parts)


@pytest.fixture(params=["files", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "files":
        yield Files(tmp_path)
        return
    url = request.getfixturevalue("database_url")
    async with await Database.open(DatabaseUrl.parse(url)) as database:
        await upgrade(database)
        yield Rows(database)


def names(result: LoadResult) -> list[str]:
    return sorted(entry.name for entry in result.entries)


async def test_entries_come_back_as_saved_with_their_secrets(backend: Backend) -> None:
    await backend.store().save(ALL)
    backend.restarted()
    result = await backend.store().load()
    assert result.warning is None and result.rejected == ()
    assert names(result) == ["docs", "open", "wiki"]
    docs = result.entry("docs")
    assert docs is not None and dict(docs.headers) == dict(DOCS.headers) and docs.url == DOCS.url
    wiki = result.entry("wiki")
    assert wiki is not None and wiki.tools == WIKI.tools and wiki.transport == "streamable-http"


async def test_put_and_remove_touch_one_entry_and_changed_tells_another_writer(backend: Backend) -> None:
    mine, theirs = backend.store(), backend.store()
    await mine.save((DOCS, OPEN))
    assert names(await theirs.load()) == ["docs", "open"]
    assert not await theirs.changed()
    assert (await mine.put(NEW)).changed is False
    assert await theirs.changed()
    assert (await mine.remove("docs")).changed is True
    assert (await mine.remove("docs")).changed is False
    assert names(await theirs.load()) == ["new", "open"]


async def test_a_write_that_follows_the_last_load_needs_no_read_back(backend: Backend) -> None:
    store = backend.store()
    await store.save((DOCS,))
    await store.load()
    saved = await store.put(NEW)
    assert saved.follows is not None
    store.taken(saved)
    assert not await store.changed()


async def test_no_credential_is_stored_in_clear(backend: Backend) -> None:
    await backend.store().save(ALL)
    await backend.store(OTHER).save((DOCS,))
    stored = await backend.stored_bytes()
    assert b"docs.example" in stored  # what is shown is there: the scan sees the rows
    assert CANARY.encode() not in stored


async def test_a_changed_entry_is_never_used(backend: Backend) -> None:
    await backend.store().save(ALL)
    await backend.edit_url("docs", "https://attacker.example/mcp")
    result = await backend.store().load()
    assert "docs" not in names(result)
    assert all(entry.url != "https://attacker.example/mcp" for entry in result.entries)
    assert result.refused or "docs" in {r.name for r in result.rejected}


async def test_an_entry_moved_from_another_chat_does_not_open_there(backend: Backend) -> None:
    await backend.store(OTHER).save((NEW,))
    await backend.store().save((DOCS,))
    await backend.move("docs", SCOPE, OTHER)
    result = await backend.store(OTHER).load()
    assert result.entry("docs") is None
    assert result.refused or "docs" in {r.name for r in result.rejected}


async def test_an_entry_put_back_from_an_earlier_write_is_refused(backend: Backend) -> None:
    store = backend.store()
    await store.save(ALL)
    before = await backend.snapshot()
    await store.put(DOCS.__class__(DOCS.name, "https://docs.example/v2", auth_kind="none"))
    await backend.put_back_entry(before, "docs")
    result = await backend.store().load()
    assert result.refused and result.entries == ()
    assert result.warning is not None and "/mcp_restore" in result.warning


async def test_a_rolled_back_state_is_refused_and_restore_puts_back_the_last_write(backend: Backend) -> None:
    store = backend.store()
    await store.save(ALL)
    before = await backend.snapshot()
    await store.remove("docs")  # say the owner removed a server whose key leaked
    await backend.put_back(before)
    result = await store.load()
    assert result.refused and result.entry("docs") is None
    restored = await store.restore()
    assert restored.changed
    assert names(await store.load()) == ["open", "wiki"]
    assert (await store.restore()).changed is False


async def test_an_owner_write_after_a_rollback_starts_from_the_last_write(backend: Backend) -> None:
    store = backend.store()
    await store.save(ALL)
    before = await backend.snapshot()
    await store.remove("docs")
    await backend.put_back(before)
    saved = await store.put(NEW)
    assert any("copy Playa saved last" in note for note in saved.notes)
    assert names(await store.load()) == ["new", "open", "wiki"]


async def test_restore_without_a_copy_is_a_clear_error(backend: Backend) -> None:
    with pytest.raises(StoreError, match="no saved copy to restore"):
        await backend.store().restore()


async def test_two_writers_at_once_lose_no_entry(backend: Backend) -> None:
    entries = [NEW.__class__(f"s{n}", f"https://s{n}.example/mcp") for n in range(8)]
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for entry in entries:
                tg.start_soon(backend.store().put, entry)
    assert names(await backend.store().load()) == sorted(e.name for e in entries)


# --- a server's own write: only over the entry it was built from ----------------------------------

NEW_KEY = "canary-8b3f2c19-new-key"


def _rekeyed(entry: ServerEntry) -> ServerEntry:
    """``entry`` as the owner adds it again with a new key (``/mcp_add`` with its name)."""
    return replace(entry, headers={"Authorization": f"Bearer {NEW_KEY}"}, pins=None)


async def test_a_servers_own_write_lands_over_the_entry_it_was_built_from(backend: Backend) -> None:
    store = backend.store()
    await store.save(ALL)
    pinned = replace(DOCS, pins=Pins({}), policy=Policy(server="ask"))
    saved = await store.rewrite(pinned, built_from=DOCS)
    assert saved is not None and saved.entry is pinned
    again = await store.rewrite(replace(pinned, policy=Policy(server="deny")), built_from=pinned)
    assert again is not None
    docs = (await backend.store().load()).entry("docs")
    assert docs is not None and docs.pins == Pins({}) and docs.policy == Policy(server="deny")


async def test_a_late_write_of_a_replaced_entry_is_dropped_and_the_new_key_stays(backend: Backend) -> None:
    old_server, owner = backend.store(), backend.store()
    await owner.save(ALL)
    await owner.put(_rekeyed(DOCS))  # the owner's replacement lands first
    late = replace(DOCS, pins=Pins({}))
    assert await old_server.rewrite(late, built_from=DOCS) is None
    docs = (await backend.store().load()).entry("docs")
    assert docs is not None and dict(docs.headers) == {"Authorization": f"Bearer {NEW_KEY}"}
    assert docs.pins is None
    assert CANARY.encode() not in await backend.stored_bytes()


async def test_a_late_write_of_a_removed_entry_does_not_bring_it_back(backend: Backend) -> None:
    store = backend.store()
    await store.save(ALL)
    await backend.store().remove("docs")
    assert await store.rewrite(replace(DOCS, pins=Pins({})), built_from=DOCS) is None
    result = await backend.store().load()
    assert result.warning is None and names(result) == ["open", "wiki"]


@pytest.mark.parametrize(
    "replacement",
    [
        pytest.param(replace(DOCS, url="https://docs.example/v2"), id="url"),
        pytest.param(replace(DOCS, transport="sse"), id="transport"),
        pytest.param(replace(DOCS, tools=("search",)), id="tools"),
        pytest.param(replace(DOCS, headers={"X-Key": CANARY}, auth_kind="headers"), id="headers"),
    ],
)
async def test_every_choice_of_the_owner_makes_another_server(
    backend: Backend, replacement: ServerEntry
) -> None:
    store = backend.store()
    await store.save((DOCS,))
    await store.put(replacement)
    assert await store.rewrite(replace(DOCS, pins=Pins({})), built_from=DOCS) is None
    assert (await backend.store().load()).entry("docs") == replacement


async def test_a_machine_clients_new_key_makes_another_server(backend: Backend) -> None:
    old = _machine("old-client-secret-6a1f9d2e")
    store = backend.store()
    await store.save((old,))
    new = _machine("new-client-secret-0c7b4e81")
    await store.put(new)
    refreshed = replace(old, oauth=old.oauth and old.oauth.with_tokens(_TOKENS, now=0))
    assert await store.rewrite(refreshed, built_from=old) is None
    stored = (await backend.store().load()).entry("machine")
    assert stored is not None and stored.oauth is not None
    assert (
        stored.oauth.client is not None and stored.oauth.client.client_secret == "new-client-secret-0c7b4e81"
    )
    assert stored.oauth.tokens is None
    # Its own refresh, over the entry it was built from, lands.
    own = replace(new, oauth=new.oauth and new.oauth.with_tokens(_TOKENS, now=0))
    assert await store.rewrite(own, built_from=new) is not None


async def test_a_servers_write_over_a_tampered_store_starts_from_the_last_write(backend: Backend) -> None:
    store = backend.store()
    await store.save((DOCS, OPEN))
    await backend.edit_url("docs", "https://attacker.example/mcp")
    saved = await store.rewrite(replace(DOCS, pins=Pins({})), built_from=DOCS)
    assert saved is not None and any("copy Playa saved last" in note for note in saved.notes)
    docs = (await backend.store().load()).entry("docs")
    assert docs is not None and docs.url == DOCS.url and docs.pins == Pins({})


_TOKENS = OAuthToken(access_token="access-token-3e9d51c0a7", token_type="Bearer")


def _machine(secret: str) -> ServerEntry:
    url = "https://machine.example/mcp"
    client = OAuthClientInformationFull(
        client_id="machine-client",
        client_secret=secret,
        redirect_uris=None,
        grant_types=["client_credentials"],
    )
    return ServerEntry("machine", url, auth_kind="oauth", oauth=OAuthGrant(resource_of(url), client=client))
