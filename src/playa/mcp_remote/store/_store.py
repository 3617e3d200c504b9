"""The per-chat file of remote MCP servers: sealed entries in ``.volcanic/mcp/servers.json``.

The file lives in the chat's workspace. The agent's file tools are fenced off ``.volcanic/``,
but other writers may reach it, so nothing in it is trusted until its seal opens: the seal
binds the header values to the chat's scope and to every visible field, so no one without the
host secret can add, edit, redirect, rename or move an entry.

File format (version 1)::

    {"version": 1, "generation": 7, "servers": [
      {"name": "docs", "url": "https://…/mcp?api_key=[redacted]", "transport": "auto", "tools": null,
       "auth": {"kind": "bearer", "headers": ["Authorization"]},
       "seal": {"v": 1, "kid": "…", "nonce": "…", "ct": "…"}}]}

The visible ``url`` is masked (``_url.py``); when it differs from the real one, the real URL is
sealed with the headers under ``:url`` (never a header name), and opening checks that masking
it gives the visible one. An entry written before URLs were sealed shows its own ``url``.

An entry of kind ``oauth`` has no headers; its ``OAuthGrant`` (client registration, tokens,
issuer, resource) is sealed under ``:oauth``, a key that can never be a header name.

The digests of the tool definitions the owner approved, and of those they rejected
(``_pins.Pins``), are sealed under ``:pins``. An entry without them (written before Playa
pinned tools, or just added) adopts the server's tool list on its first connect.

The owner's call policies for the server and its tools (``_policy.Policy``) are sealed under
``:policy``, only when the owner set one: an entry without takes the host's default.

Writes replace only what they touch: ``put`` and ``remove`` keep every other raw entry as it
is, including entries that fail to verify, so the owner keeps seeing those in ``/mcp_list``
until they remove them or add the name again. ``save`` writes exactly the entries given.

Rollback and deletion. Seals prove each entry, not the file: a writer could put back an older
file (a removed server, an old key) or delete it. So with a ``state_dir`` (the chat's private
folder, outside the workspace) the store keeps there a copy of the file it wrote last and a
record of it (its generation, which the file carries too, its SHA-256 and its number of
entries). A file the record does not name, or a missing file when entries existed, is refused
as a whole; ``restore`` puts the copy back, and an owner's write starts from the copy. Without
a record yet (first run, or an older Playa's file), the file is read as before.

Concurrent writers. Every write is a read-modify-write under an exclusive ``flock`` on a lock
file in that private folder, and every read takes it shared, so processes sharing a data dir
neither lose an entry nor see a file and a record from two different writes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import stat
import types
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, cast, get_args
from urllib.parse import urlsplit

from ..._files import atomic_write
from ...core import is_http_token
from ...exceptions import StoreError, ValidationError
from ...mcp import server_name_problem
from ._grant import OAuthGrant, resource_of
from ._pins import Pins
from ._policy import Policy
from ._seal import SEAL_VERSION, JSONValue, Sealer, SealError
from ._url import MaskedUrl, mask_url

__all__ = [
    "MAX_FILE_BYTES",
    "STORE_VERSION",
    "AuthKind",
    "FileSignature",
    "LoadResult",
    "Rejected",
    "Saved",
    "ServerEntry",
    "ServerStore",
    "TransportChoice",
    "private_folder",
    "store_path",
]

TransportChoice = Literal["auto", "streamable-http", "sse"]
"""The transport an entry asks for; ``auto`` tries Streamable HTTP, then SSE."""
AuthKind = Literal["none", "bearer", "headers", "oauth"]

STORE_VERSION: Final = 1
MAX_FILE_BYTES: Final = 4 * 1024 * 1024
_RELATIVE_PATH: Final = Path(".volcanic", "mcp", "servers.json")
_ASIDE_NAME: Final = "servers.json.unreadable"
_MAX_ASIDE: Final = 100
# In the chat's private folder (outside the workspace): the lock every write takes, a copy of
# the file last written, and the record of it (generation, digest, number of entries).
_PRIVATE_FOLDER: Final = "mcp-remote"
_LOCK_NAME: Final = "servers.lock"
_COPY_NAME: Final = "servers.json"
_RECORD_NAME: Final = "servers.record.json"

# Keys inside a seal that can never be header names (an HTTP token has no ':'): the real URL,
# the owner's --secret-url mark, and the OAuth grant.
_SEALED_URL: Final = ":url"
_SECRET_URL: Final = ":secret-url"
_SEALED_OAUTH: Final = ":oauth"
_SEALED_PINS: Final = ":pins"
_SEALED_POLICY: Final = ":policy"

_TRANSPORTS: Final[tuple[str, ...]] = get_args(TransportChoice)
_AUTH_KINDS: Final[tuple[str, ...]] = get_args(AuthKind)
_MAX_URL_CHARS: Final = 2048
_ENTRY_FIELDS: Final = frozenset({"name", "url", "transport", "tools", "auth", "seal"})
_AUTH_FIELDS: Final = frozenset({"kind", "headers"})


def private_folder(state_dir: Path) -> Path:
    """The extension's folder in a chat's private state folder (outside the workspace)."""
    return state_dir / _PRIVATE_FOLDER


def store_path(workspace: Path) -> Path:
    """Where a workspace keeps its sealed server file."""
    return workspace / _RELATIVE_PATH


@dataclass(frozen=True, repr=False)
class ServerEntry:
    """One remote MCP server of a chat, with its header values in clear (never in ``repr``).

    Construction checks the rules every stored entry obeys and raises ``ValidationError``
    naming the field; messages never quote a header value.
    """

    name: str
    url: str
    transport: TransportChoice = "auto"
    tools: tuple[str, ...] | None = None
    auth_kind: AuthKind = "none"
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    secret_url: bool = False
    """The owner marked every path segment and query value of the URL as secret."""
    oauth: OAuthGrant | None = field(default=None, compare=False, hash=False)
    """The OAuth state of an ``oauth`` entry (None until a login began). Not compared: a
    refreshed token is the same server, and must not make the chat reconnect it."""
    pins: Pins | None = field(default=None, compare=False, hash=False)
    """The tool definitions the owner approved and rejected; None until the first connect
    adopts the server's list. Not compared: a decision must not make the chat reconnect."""
    policy: Policy = field(default_factory=Policy, compare=False, hash=False)
    """The owner's call policies for the server and its tools. Not compared, as the pins."""
    _masked: MaskedUrl = field(init=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_url(self.url)
        object.__setattr__(self, "_masked", mask_url(self.url, secret_url=self.secret_url))
        if self.transport not in _TRANSPORTS:
            raise ValidationError("transport", f"transport must be one of {', '.join(_TRANSPORTS)}")
        if self.tools is not None:
            if not isinstance(self.tools, (tuple, list)):
                raise ValidationError("tools", "tools must be a list of tool names, or null for all")
            tools = tuple(self.tools)
            _check_tools(tools)
            object.__setattr__(self, "tools", tools)
        if self.auth_kind not in _AUTH_KINDS:
            raise ValidationError("auth", f"auth kind must be one of {', '.join(_AUTH_KINDS)}")
        headers = dict(self.headers)
        _check_headers(headers)
        if self.auth_kind == "none" and headers:
            raise ValidationError("auth", "auth kind 'none' cannot carry headers")
        if self.auth_kind == "oauth":
            if headers:
                raise ValidationError("auth", "auth kind 'oauth' cannot carry headers")
            if self.oauth is not None and self.oauth.resource != resource_of(self.url):
                # The grant was made for another server: its tokens must never be sent here.
                raise ValidationError("oauth", "the authorization was granted for another URL")
        elif self.auth_kind != "none" and not headers:
            raise ValidationError("auth", f"auth kind {self.auth_kind!r} needs at least one header")
        if self.oauth is not None and self.auth_kind != "oauth":
            raise ValidationError("oauth", f"auth kind {self.auth_kind!r} cannot carry an authorization")
        # A read-only copy: the caller's dict can change later, the entry must not.
        object.__setattr__(self, "headers", types.MappingProxyType(headers))

    @property
    def header_names(self) -> tuple[str, ...]:
        """The names of the headers sent to the server (safe to show)."""
        return tuple(self.headers)

    @property
    def shown_url(self) -> str:
        """The URL with its credentials masked: what the file, replies and the prompt show."""
        return self._masked.shown

    @property
    def secrets(self) -> frozenset[str]:
        """Every credential of the entry: its header values, the secret parts of its URL, and its
        OAuth tokens and client secret."""
        grant = self.oauth.secrets if self.oauth is not None else frozenset()
        return frozenset(self.headers.values()) | self._masked.secrets | grant

    def __repr__(self) -> str:
        return (
            f"ServerEntry(name={self.name!r}, url={self.shown_url!r}, transport={self.transport!r}, "
            f"tools={self.tools!r}, auth_kind={self.auth_kind!r}, header_names={self.header_names!r})"
        )


def _check_name(name: object) -> None:
    if (problem := server_name_problem(name)) is not None:
        raise ValidationError("name", problem)


def _check_url(url: object) -> None:
    if not isinstance(url, str) or not url or len(url) > _MAX_URL_CHARS:
        raise ValidationError("url", f"url must be text of at most {_MAX_URL_CHARS} characters")
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        raise ValidationError("url", "url must be ASCII without spaces or control characters")
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValidationError("url", "url is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise ValidationError("url", "url must be http:// or https:// with a host")


def _check_tools(tools: tuple[object, ...]) -> None:
    seen: set[str] = set()
    for tool in tools:
        if not isinstance(tool, str) or not tool or len(tool) > 128:
            raise ValidationError("tools", "each tool name must be non-empty text of at most 128 characters")
        if tool in seen:
            raise ValidationError("tools", "a tool is listed twice")
        seen.add(tool)


def _check_headers(headers: Mapping[str, object]) -> None:
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not is_http_token(name):
            raise ValidationError("headers", "a header name is not a valid HTTP token")
        if name.lower() in seen:
            raise ValidationError("headers", f"header {name!r} is given twice")
        seen.add(name.lower())
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            # The value is deliberately not quoted: it is a credential.
            raise ValidationError(
                "headers", f"the value of header {name!r} must be text without CR, LF or NUL"
            )


@dataclass(frozen=True)
class Rejected:
    """An entry of the file that is ignored, and why (safe to show the owner)."""

    index: int
    """Position in the file's ``servers`` list (0-based)."""
    name: str | None
    """The entry's ``name`` if it is text (it may be anything the agent wrote), else None."""
    reason: str


@dataclass(frozen=True)
class FileSignature:
    """Cheap identity of the file's state: it changes whenever the file is written or replaced."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    error: int = 0
    """The errno when the file could not even be stat'ed (other than missing)."""


@dataclass(frozen=True)
class LoadResult:
    """What a load found: usable entries, ignored ones, and a warning when the file is unusable."""

    entries: tuple[ServerEntry, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    warning: str | None = None
    signature: FileSignature | None = None
    """The file's signature taken before reading; None when there is no file."""
    refused: bool = False
    """The file is not the one this store wrote last (rolled back, replaced or deleted)."""

    def entry(self, name: str) -> ServerEntry | None:
        """The usable entry called ``name``, if any."""
        return next((e for e in self.entries if e.name == name), None)


class _JSONObject(dict[str, object]):
    """A parsed JSON object that remembers whether the text repeated a key."""

    repeated = False


def _object_pairs(pairs: list[tuple[str, object]]) -> _JSONObject:
    obj = _JSONObject(pairs)
    if len(obj) != len(pairs):
        obj.repeated = True
    return obj


def _refuse_constant(token: str) -> object:
    raise ValueError(f"{token} is not allowed")


def _parse_float(text: str) -> float:
    value = float(text)
    # 1e999 parses as inf, which json.dumps could not write back when the entry is kept.
    if value in (float("inf"), float("-inf")):
        raise ValueError("number out of range")
    return value


class _Unreadable(Exception):
    """The file exists but cannot be used at all (internal: becomes a warning or StoreError)."""

    def __init__(self, warning: str, *, movable: bool) -> None:
        super().__init__(warning)
        self.warning = warning
        # True when an owner's write may set the file aside and start over (whatever is in the
        # way: bad bytes, a newer format, a folder or FIFO, a file it cannot read); False when
        # the folder itself leads elsewhere, where no write may go.
        self.movable = movable


class _Reject(Exception):
    """One entry is unusable (internal: becomes a ``Rejected``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ServerStore:
    """Reads and writes one chat's sealed server file.

    ``scope`` is the chat's session scope (``telegram:123``, ``console:default``); it is part
    of every seal, so an entry copied from another chat's file does not open here.
    I/O is blocking and small; callers on an event loop may run it in a worker thread.
    """

    def __init__(self, workspace: Path, scope: str, sealer: Sealer, *, state_dir: Path | None = None) -> None:
        if not isinstance(scope, str) or not scope:
            raise ValueError("scope must be a non-empty string")
        self._workspace = workspace
        self._scope = scope
        self._sealer = sealer
        self._path = store_path(workspace)
        self._private = None if state_dir is None else private_folder(state_dir)
        self._loaded: FileSignature | None = None
        self._ever_loaded = False

    @functools.cached_property
    def _expected_folder(self) -> Path:
        """Where ``.volcanic/mcp`` must lead: inside the workspace, which the agent cannot move."""
        return Path(os.path.realpath(self._workspace)) / _RELATIVE_PATH.parent

    def __repr__(self) -> str:
        return f"ServerStore(path={str(self._path)!r}, scope={self._scope!r})"

    @property
    def path(self) -> Path:
        return self._path

    @property
    def scope(self) -> str:
        return self._scope

    # --- reading -----------------------------------------------------------------------

    def signature(self) -> FileSignature | None:
        """The file's current signature (one ``lstat``); None when there is no file."""
        try:
            st = os.lstat(self._path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return FileSignature(0, 0, 0, 0, 0, error=exc.errno or -1)
        return FileSignature(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def changed(self) -> bool:
        """Whether the file may differ from what the last ``load`` read (True before any load).

        Costs one ``lstat``. Writes through this store also count as changes, so the caller
        reloads after them like after any other edit.
        """
        return not self._ever_loaded or self.signature() != self._loaded

    def load(self) -> LoadResult:
        """Read the file: the entries whose seals open, and every other entry with a reason.

        Never raises for anything in the file: a missing file means no servers; an unusable
        one means no servers and a warning for the owner.
        """
        signature = self.signature()
        self._loaded, self._ever_loaded = signature, True
        try:
            with self._locked(exclusive=False):
                record = self._read_record()
                try:
                    data = self._read_bytes()
                except _Unreadable as exc:
                    hint = f"; {_RESTORE_HINT}" if record is not None else ""
                    return LoadResult(warning=exc.warning + hint, signature=signature)
        except StoreError as exc:
            return LoadResult(warning=str(exc), signature=signature)
        if record is not None and (refusal := _refusal(record, data)) is not None:
            return LoadResult(warning=refusal, signature=signature, refused=True)
        if data is None:
            return LoadResult(signature=signature)
        try:
            servers = _parse_document(data, _RELATIVE_PATH.as_posix())
        except _Unreadable as exc:
            return LoadResult(warning=exc.warning, signature=signature)
        return self._verify(servers, signature)

    def _verify(self, servers: list[object], signature: FileSignature | None) -> LoadResult:
        opened: list[tuple[int, ServerEntry]] = []
        rejected: list[Rejected] = []
        for index, raw in enumerate(servers):
            try:
                opened.append((index, self._open_entry(raw)))
            except _Reject as exc:
                rejected.append(Rejected(index, _raw_name(raw), exc.reason))
        # Two verified entries with one name can only come from an old copy spliced into the
        # file; keeping either could bring back a removed URL or header, so neither is used.
        counts = Counter(entry.name for _, entry in opened)
        entries: list[ServerEntry] = []
        for index, entry in opened:
            if counts[entry.name] > 1:
                reason = (
                    f"duplicate name: {counts[entry.name]} entries are named {entry.name!r}; add it again"
                )
                rejected.append(Rejected(index, entry.name, reason))
            else:
                entries.append(entry)
        rejected.sort(key=lambda r: r.index)
        return LoadResult(tuple(entries), tuple(rejected), None, signature)

    def _open_entry(self, raw: object) -> ServerEntry:
        if not isinstance(raw, dict):
            raise _Reject("malformed: entry is not an object")
        seal = raw.get("seal")
        if isinstance(seal, dict) and "v" in seal:
            # Checked first so an entry from a newer format says so, not "malformed".
            version = seal["v"]
            if type(version) is int and version != SEAL_VERSION:
                raise _Reject("unknown version: entry was written by a newer or unknown format")
        if getattr(raw, "repeated", False):
            raise _Reject("malformed: entry repeats a field")
        if set(raw) != _ENTRY_FIELDS:
            missing = sorted(_ENTRY_FIELDS - set(raw))
            if missing:
                raise _Reject(f"malformed: missing field(s) {', '.join(missing)}")
            raise _Reject(
                f"malformed: unexpected field(s) (expected only {', '.join(sorted(_ENTRY_FIELDS))})"
            )
        name, url, transport, tools, auth = (
            raw["name"],
            raw["url"],
            raw["transport"],
            raw["tools"],
            raw["auth"],
        )
        if not isinstance(name, str) or not isinstance(url, str) or not isinstance(transport, str):
            raise _Reject("malformed: name, url and transport must be text")
        if tools is not None and not (isinstance(tools, list) and all(isinstance(t, str) for t in tools)):
            raise _Reject("malformed: tools must be a list of names or null")
        if not isinstance(auth, dict) or getattr(auth, "repeated", False) or set(auth) != _AUTH_FIELDS:
            raise _Reject("malformed: auth must be an object with kind and headers")
        kind, header_names = auth["kind"], auth["headers"]
        if not isinstance(kind, str) or not (
            isinstance(header_names, list) and all(isinstance(h, str) for h in header_names)
        ):
            raise _Reject("malformed: auth kind must be text and auth headers a list of names")
        if getattr(seal, "repeated", False):
            raise _Reject("malformed: seal repeats a field")
        context = _context(self._scope, name, url, transport, tools, kind, header_names)
        try:
            sealed = self._sealer.open(seal, context)
        except SealError as exc:
            raise _Reject(exc.reason) from None
        headers = {k: v for k, v in sealed.items() if not k.startswith(":")}
        extras = {k: v for k, v in sealed.items() if k.startswith(":")}
        if sorted(headers) != sorted(header_names):
            raise _Reject("seal does not verify: sealed headers differ from the listed header names")
        if not set(extras) <= {_SEALED_URL, _SECRET_URL, _SEALED_OAUTH, _SEALED_PINS, _SEALED_POLICY}:
            raise _Reject("unknown version: the seal holds fields this Playa does not know")
        grant: OAuthGrant | None = None
        if _SEALED_OAUTH in extras:
            try:
                grant = OAuthGrant.decode(extras[_SEALED_OAUTH])
            except ValidationError as exc:
                raise _Reject(f"malformed: {exc}") from None
        pins: Pins | None = None
        if _SEALED_PINS in extras:
            try:
                pins = Pins.decode(extras[_SEALED_PINS])
            except ValidationError as exc:
                raise _Reject(f"malformed: {exc}") from None
        policy = Policy()
        if _SEALED_POLICY in extras:
            try:
                policy = Policy.decode(extras[_SEALED_POLICY])
            except ValidationError as exc:
                raise _Reject(f"malformed: {exc}") from None
        try:
            # Validated types above; the literals are checked by ServerEntry itself.
            entry = ServerEntry(
                name,
                extras.get(_SEALED_URL, url),  # an entry from before URLs were sealed shows its own
                cast(TransportChoice, transport),
                None if tools is None else tuple(tools),
                cast(AuthKind, kind),
                headers,
                secret_url=_SECRET_URL in extras,
                oauth=grant,
                pins=pins,
                policy=policy,
            )
        except ValidationError as exc:
            # A name an older Playa took and this one refuses (the reserved "mcp") says why.
            raise _Reject(str(exc) if exc.field == "name" else f"malformed: {exc}") from None
        if _SEALED_URL in extras and entry.shown_url != url:
            raise _Reject("seal does not verify: the sealed URL does not match the shown one")
        return entry

    def _read_bytes(self) -> bytes | None:
        """The file's bytes, None when there is no file; raises ``_Unreadable``."""
        rel = _RELATIVE_PATH.as_posix()
        self._check_folder(create=False)
        flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(self._path, flags)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Unreadable(f"{rel} is a symbolic link; it is ignored", movable=True) from None
            raise _Unreadable(f"cannot read {rel}: {exc.strerror}", movable=True) from None
        try:
            # O_NONBLOCK and this check keep a FIFO or device planted by the agent from
            # blocking the chat; a directory can be opened on Linux, so it lands here too.
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _Unreadable(f"{rel} is not a regular file", movable=True)
            if st.st_size > MAX_FILE_BYTES:
                raise _Unreadable(f"{rel} is larger than {MAX_FILE_BYTES // 2**20} MiB", movable=True)
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise _Unreadable(f"cannot read {rel}: {exc.strerror}", movable=True) from None
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_BYTES:
            raise _Unreadable(f"{rel} is larger than {MAX_FILE_BYTES // 2**20} MiB", movable=True)
        return data

    def _check_folder(self, *, create: bool) -> None:
        """Refuse a ``.volcanic/mcp`` folder that is a link leading elsewhere.

        Otherwise the agent could point this chat's folder at another chat's, and our writes
        would replace that chat's file.
        """
        folder = self._path.parent
        if create:
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create {_RELATIVE_PATH.parent.as_posix()}: {exc.strerror}"
                ) from None
        if folder.exists() and Path(os.path.realpath(folder)) != self._expected_folder:
            message = f"{_RELATIVE_PATH.parent.as_posix()} is a link to another folder; it is ignored"
            if create:
                raise StoreError(message)
            raise _Unreadable(message, movable=False)

    # --- writing -----------------------------------------------------------------------

    def save(self, entries: Sequence[ServerEntry]) -> Saved:
        """Replace the file with exactly ``entries`` (each sealed afresh)."""
        names = Counter(e.name for e in entries)
        if dupes := sorted(n for n, c in names.items() if c > 1):
            raise StoreError(f"cannot save two servers named {dupes[0]!r}")
        return self._update(lambda _servers: ([self._sealed(e) for e in entries], True))

    def put(self, entry: ServerEntry) -> Saved:
        """Add ``entry``, replacing every entry of that name; ``changed`` when one was replaced."""

        def change(servers: list[object]) -> tuple[list[object], bool]:
            kept = [raw for raw in servers if _raw_name(raw) != entry.name]
            return [*kept, self._sealed(entry)], len(kept) != len(servers)

        return self._update(change)

    def remove(self, name: str) -> Saved:
        """Remove every entry called ``name``, usable or not; ``changed`` False when there was none."""

        def change(servers: list[object]) -> tuple[list[object], bool]:
            kept = [raw for raw in servers if _raw_name(raw) != name]
            return kept, len(kept) != len(servers)

        return self._update(change, always=False)

    def restore(self) -> Saved:
        """Put back the copy of the file this store wrote last (``/mcp_restore``)."""
        if self._private is None:
            raise StoreError("this host keeps no copy of the server file to restore")
        with self._locked(exclusive=True):
            record = self._read_record()
            copy = self._read_copy(record)
            if record is None or copy is None:
                raise StoreError(
                    "there is no saved copy to restore: no server was saved here since Playa kept one"
                )
            notes: list[str] = []
            try:
                current = self._read_bytes()
            except _Unreadable as exc:
                notes.append(self._set_aside(exc))
            else:
                if current == copy:
                    return Saved(False, ())
                if current is not None:
                    notes.append(self._set_aside(None))
            self._check_folder(create=True)
            _atomic_write(self._path, copy)
            return Saved(True, tuple(notes))

    def _update(
        self, change: Callable[[list[object]], tuple[list[object], bool]], *, always: bool = True
    ) -> Saved:
        """A locked read-modify-write: no other process's write lands in between and is lost."""
        with self._locked(exclusive=True):
            record = self._read_record()
            notes: list[str] = []
            try:
                data = self._read_bytes()
            except _Unreadable as exc:
                notes.append(self._set_aside(exc))
                data = None
                servers: list[object] = self._trusted_copy(record, notes)
            else:
                if record is not None and _refusal(record, data) is not None:
                    # Not the file this store wrote last: the owner's change starts from the copy
                    # that was, never from a rolled-back or foreign file.
                    if data is not None:
                        notes.append(self._set_aside(None))
                    servers = self._trusted_copy(record, notes)
                elif data is None:
                    servers = []
                else:
                    try:
                        servers = _parse_document(data, _RELATIVE_PATH.as_posix())
                    except _Unreadable as exc:
                        notes.append(self._set_aside(exc))
                        servers = []
            updated, changed = change(servers)
            if always or changed or notes:
                self._write(updated, (record.generation if record else 0) + 1)
            return Saved(changed, tuple(notes))

    def _trusted_copy(self, record: _Record | None, notes: list[str]) -> list[object]:
        copy = self._read_copy(record)
        if copy is None:
            return []
        try:
            servers = _parse_document(copy, "the saved copy")
        except _Unreadable:
            return []
        notes.append(f"I started from the copy Playa saved last ({_count(len(servers))})")
        return servers

    def _set_aside(self, problem: _Unreadable | None) -> str:
        """Move what is in the file's place aside (never delete it); say so for the reply."""
        rel = _RELATIVE_PATH.as_posix()
        if problem is not None and not problem.movable:
            raise StoreError(problem.warning)
        why = problem.warning if problem is not None else f"{rel} was not the file Playa saved last"
        for n in range(1, _MAX_ASIDE + 1):
            aside = self._path.with_name(_ASIDE_NAME if n == 1 else f"{_ASIDE_NAME}.{n}")
            if not os.path.lexists(aside):
                break
        else:
            raise StoreError(f"{why}, and there are too many files set aside already; remove some")
        try:
            os.rename(self._path, aside)
        except OSError as err:
            raise StoreError(f"{why}, and it cannot be moved aside: {err.strerror}") from None
        return f"{why}; I moved it aside to {_RELATIVE_PATH.parent.as_posix()}/{aside.name}"

    def _sealed(self, entry: ServerEntry) -> dict[str, JSONValue]:
        visible = _visible(entry)
        context = _context(
            self._scope,
            entry.name,
            entry.shown_url,
            entry.transport,
            entry.tools,
            entry.auth_kind,
            sorted(entry.headers),
        )
        sealed = dict(entry.headers)
        # The real URL goes inside the seal only when it differs from the shown one, so an entry
        # without URL secrets is sealed exactly as before (and an older Playa still opens it).
        if entry.url != entry.shown_url:
            sealed[_SEALED_URL] = entry.url
        if entry.secret_url:
            sealed[_SECRET_URL] = "yes"
        if entry.oauth is not None:
            sealed[_SEALED_OAUTH] = entry.oauth.encode()
        if entry.pins is not None:
            sealed[_SEALED_PINS] = entry.pins.encode()
        if not entry.policy.empty:
            sealed[_SEALED_POLICY] = entry.policy.encode()
        seal = self._sealer.seal(context, sealed)
        return {
            **visible,
            "seal": {"v": seal["v"], "kid": seal["kid"], "nonce": seal["nonce"], "ct": seal["ct"]},
        }

    def _write(self, servers: list[object], generation: int) -> None:
        self._check_folder(create=True)
        try:
            text = json.dumps(
                {"version": STORE_VERSION, "generation": generation, "servers": servers},
                indent=2,
                ensure_ascii=True,
                allow_nan=False,
            )
        except (ValueError, RecursionError):
            raise StoreError(
                "the server file cannot be written: an ignored entry cannot be encoded"
            ) from None
        data = (text + "\n").encode("ascii")
        if len(data) > MAX_FILE_BYTES:
            raise StoreError(f"the server file would exceed {MAX_FILE_BYTES // 2**20} MiB")
        if self._private is None:
            _atomic_write(self._path, data)
            return
        # The copy first, then the file, then the record naming it: a crash in between leaves a
        # file the record does not name, which is refused until /mcp_restore puts the copy back.
        record = _Record(generation, hashlib.sha256(data).hexdigest(), len(servers))
        try:
            os.makedirs(self._private, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the server store's private folder: {exc.strerror}") from None
        _atomic_write(self._private / _COPY_NAME, data)
        _atomic_write(self._path, data)
        _atomic_write(self._private / _RECORD_NAME, record.encode())

    # --- the private record, the copy and the lock -------------------------------------

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        """An OS lock shared by every process using this data dir (readers shared, writers alone)."""
        if self._private is None:
            yield
            return
        path, flags = self._private / _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            try:
                fd = os.open(path, flags, 0o600)
            except FileNotFoundError:  # the first use of this data dir's store
                os.makedirs(self._private, mode=0o700, exist_ok=True)
                fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open the server store's lock: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _read_record(self) -> _Record | None:
        if self._private is None:
            return None
        try:
            data = (self._private / _RECORD_NAME).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read the server store's record: {exc.strerror}") from None
        return _Record.decode(data)

    def _read_copy(self, record: _Record | None) -> bytes | None:
        """The saved copy, if it is the one the record names."""
        if self._private is None or record is None:
            return None
        try:
            copy = (self._private / _COPY_NAME).read_bytes()
        except OSError:
            return None
        return copy if hashlib.sha256(copy).hexdigest() == record.digest else None


@dataclass(frozen=True)
class Saved:
    """What a write did: ``changed`` (replaced, removed, restored) and notes for the owner."""

    changed: bool
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Record:
    """What the store wrote last, kept outside the workspace: the rollback and deletion check."""

    generation: int
    digest: str
    entries: int

    def encode(self) -> bytes:
        fields = {"version": 1, "generation": self.generation, "digest": self.digest, "entries": self.entries}
        return json.dumps(fields).encode("ascii")

    @classmethod
    def decode(cls, data: bytes) -> _Record | None:
        # Only this store writes it, outside every workspace; a damaged one counts as none.
        try:
            fields = json.loads(data)
            record = cls(int(fields["generation"]), str(fields["digest"]), int(fields["entries"]))
        except (ValueError, TypeError, KeyError):
            return None
        return record


_RESTORE_HINT: Final = "the owner can put back the copy Playa saved last with /mcp_restore"


def _count(n: int) -> str:
    return "1 entry" if n == 1 else f"{n} entries"


def _refusal(record: _Record, data: bytes | None) -> str | None:
    """Why a file is not the one the record names (count only: no name is shown), or None."""
    rel = _RELATIVE_PATH.as_posix()
    if data is None:
        if record.entries == 0:
            return None
        return f"{rel} is missing, but Playa saved {_count(record.entries)} in it last; {_RESTORE_HINT}"
    if hashlib.sha256(data).hexdigest() == record.digest:
        return None
    try:
        doc = json.loads(data)
        generation = doc.get("generation") if isinstance(doc, dict) else None
        servers = doc.get("servers") if isinstance(doc, dict) else None
    except (ValueError, RecursionError):
        generation, servers = None, None
    older = type(generation) is int and generation < record.generation
    what = "an older copy of the file Playa saved" if older else "not the file Playa saved last"
    held = f" ({_count(len(servers))})" if isinstance(servers, list) else ""
    return f"{rel} is {what}, so it is not used{held}; {_RESTORE_HINT}"


def _visible(entry: ServerEntry) -> dict[str, JSONValue]:
    return {
        "name": entry.name,
        "url": entry.shown_url,
        "transport": entry.transport,
        "tools": None if entry.tools is None else list(entry.tools),
        "auth": {"kind": entry.auth_kind, "headers": sorted(entry.headers)},
    }


def _context(
    scope: str,
    name: str,
    url: str,
    transport: str,
    tools: Sequence[str] | None,
    kind: str,
    header_names: Sequence[str],
) -> dict[str, JSONValue]:
    """What a seal binds: the chat's scope and every visible field, exactly as stored."""
    return {
        "scope": scope,
        "name": name,
        "url": url,
        "transport": transport,
        "tools": None if tools is None else list(tools),
        "auth": {"kind": kind, "headers": list(header_names)},
    }


def _raw_name(raw: object) -> str | None:
    if isinstance(raw, dict):
        name = raw.get("name")
        if isinstance(name, str):
            return name
    return None


def _parse_document(data: bytes, rel: str) -> list[object]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Unreadable(f"{rel} is not UTF-8 text", movable=True) from None
    try:
        doc = json.loads(
            text, object_pairs_hook=_object_pairs, parse_constant=_refuse_constant, parse_float=_parse_float
        )
    except json.JSONDecodeError as exc:
        raise _Unreadable(f"{rel} is not valid JSON ({exc.msg}, line {exc.lineno})", movable=True) from None
    except (ValueError, RecursionError):
        raise _Unreadable(f"{rel} is not valid JSON", movable=True) from None
    if not isinstance(doc, dict):
        raise _Unreadable(f"{rel} is not a JSON object", movable=True)
    if getattr(doc, "repeated", False):
        raise _Unreadable(f"{rel} repeats a top-level key", movable=True)
    version = doc.get("version")
    if type(version) is not int:
        raise _Unreadable(f"{rel} has no format version", movable=True)
    if version != STORE_VERSION:
        # Set aside, never overwritten, by an owner's write: a newer Playa may have written it.
        raise _Unreadable(
            f"{rel} has unknown format version; this Playa reads version {STORE_VERSION}", movable=True
        )
    servers = doc.get("servers")
    if not isinstance(servers, list):
        raise _Unreadable(f"{rel} has no 'servers' list", movable=True)
    return servers


def _atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old file or the new one, never half."""
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise StoreError(f"cannot write {_RELATIVE_PATH.as_posix()}: {exc.strerror}") from None
