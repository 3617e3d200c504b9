"""An entry as the file holds it: its visible fields, and the seal over them and its secrets.

The seal binds the chat's scope and every visible field (``context``), so an entry that was
edited, renamed, redirected or copied from another chat's file does not open. Inside it: the
header values, and under keys that can never be header names (an HTTP token has no ``:``) the
real URL, the owner's ``--secret-url`` mark, the OAuth grant, the tool pins and the policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, NamedTuple, TypeVar, cast

from ...exceptions import ValidationError
from ._entry import AuthKind, ServerEntry, TransportChoice
from ._grant import OAuthGrant
from ._pins import Pins
from ._policy import Policy
from ._seal import SEAL_VERSION, JSONValue, Sealer, SealError

__all__ = ["EntryRejected", "open_entry", "raw_name", "seal_entry"]

_SEALED_URL: Final = ":url"
_SECRET_URL: Final = ":secret-url"
_SEALED_OAUTH: Final = ":oauth"
_SEALED_PINS: Final = ":pins"
_SEALED_POLICY: Final = ":policy"
_SEALED_EXTRAS: Final = frozenset({_SEALED_URL, _SECRET_URL, _SEALED_OAUTH, _SEALED_PINS, _SEALED_POLICY})

_ENTRY_FIELDS: Final = frozenset({"name", "url", "transport", "tools", "auth", "seal"})
_AUTH_FIELDS: Final = frozenset({"kind", "headers"})

_Decoded = TypeVar("_Decoded")


class EntryRejected(Exception):
    """One entry of the file is unusable; ``reason`` is safe to show the owner."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Visible(NamedTuple):
    """An entry's fields outside its seal, as read from the file (types checked, values not yet)."""

    name: str
    url: str
    transport: str
    tools: list[str] | None
    kind: str
    header_names: list[str]
    seal: object


def raw_name(raw: object) -> str | None:
    """The ``name`` of a raw entry if it is text (it may be anything the agent wrote), else None."""
    if isinstance(raw, dict):
        name = raw.get("name")
        if isinstance(name, str):
            return name
    return None


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


def seal_entry(sealer: Sealer, scope: str, entry: ServerEntry) -> dict[str, JSONValue]:
    """The entry as the file holds it: its visible fields and a fresh seal for ``scope``."""
    header_names = sorted(entry.headers)
    context = _context(
        scope, entry.name, entry.shown_url, entry.transport, entry.tools, entry.auth_kind, header_names
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
    seal = sealer.seal(context, sealed)
    return {
        "name": entry.name,
        "url": entry.shown_url,
        "transport": entry.transport,
        "tools": None if entry.tools is None else list(entry.tools),
        "auth": {"kind": entry.auth_kind, "headers": header_names},
        "seal": {"v": seal["v"], "kid": seal["kid"], "nonce": seal["nonce"], "ct": seal["ct"]},
    }


def _visible(raw: object) -> _Visible:
    """The visible fields of a raw entry, or why they are malformed."""
    if not isinstance(raw, dict):
        raise EntryRejected("malformed: entry is not an object")
    seal = raw.get("seal")
    if isinstance(seal, dict) and "v" in seal:
        # Checked first so an entry from a newer format says so, not "malformed".
        version = seal["v"]
        if type(version) is int and version != SEAL_VERSION:
            raise EntryRejected("unknown version: entry was written by a newer or unknown format")
    if getattr(raw, "repeated", False):
        raise EntryRejected("malformed: entry repeats a field")
    if set(raw) != _ENTRY_FIELDS:
        missing = sorted(_ENTRY_FIELDS - set(raw))
        if missing:
            raise EntryRejected(f"malformed: missing field(s) {', '.join(missing)}")
        raise EntryRejected(
            f"malformed: unexpected field(s) (expected only {', '.join(sorted(_ENTRY_FIELDS))})"
        )
    name, url, transport, tools, auth = raw["name"], raw["url"], raw["transport"], raw["tools"], raw["auth"]
    if not isinstance(name, str) or not isinstance(url, str) or not isinstance(transport, str):
        raise EntryRejected("malformed: name, url and transport must be text")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, str) for t in tools)):
        raise EntryRejected("malformed: tools must be a list of names or null")
    if not isinstance(auth, dict) or getattr(auth, "repeated", False) or set(auth) != _AUTH_FIELDS:
        raise EntryRejected("malformed: auth must be an object with kind and headers")
    kind, header_names = auth["kind"], auth["headers"]
    if not isinstance(kind, str) or not (
        isinstance(header_names, list) and all(isinstance(h, str) for h in header_names)
    ):
        raise EntryRejected("malformed: auth kind must be text and auth headers a list of names")
    if getattr(seal, "repeated", False):
        raise EntryRejected("malformed: seal repeats a field")
    return _Visible(name, url, transport, tools, kind, header_names, seal)


def _decoded(extras: Mapping[str, str], key: str, decode: Callable[[str], _Decoded]) -> _Decoded | None:
    """A sealed extra decoded, None when absent; a malformed one rejects the entry."""
    if key not in extras:
        return None
    try:
        return decode(extras[key])
    except ValidationError as exc:
        raise EntryRejected(f"malformed: {exc}") from None


def open_entry(sealer: Sealer, scope: str, raw: object) -> ServerEntry:
    """The entry a raw one of the file holds, if its seal opens for ``scope``; else ``EntryRejected``."""
    shown = _visible(raw)
    context = _context(
        scope, shown.name, shown.url, shown.transport, shown.tools, shown.kind, shown.header_names
    )
    try:
        sealed = sealer.open(shown.seal, context)
    except SealError as exc:
        raise EntryRejected(exc.reason) from None
    headers = {k: v for k, v in sealed.items() if not k.startswith(":")}
    extras = {k: v for k, v in sealed.items() if k.startswith(":")}
    if sorted(headers) != sorted(shown.header_names):
        raise EntryRejected("seal does not verify: sealed headers differ from the listed header names")
    if not set(extras) <= _SEALED_EXTRAS:
        raise EntryRejected("unknown version: the seal holds fields this Playa does not know")
    grant = _decoded(extras, _SEALED_OAUTH, OAuthGrant.decode)
    pins = _decoded(extras, _SEALED_PINS, Pins.decode)
    policy = _decoded(extras, _SEALED_POLICY, Policy.decode)
    try:
        # Validated types above; the literals are checked by ServerEntry itself.
        entry = ServerEntry(
            shown.name,
            extras.get(_SEALED_URL, shown.url),  # an entry from before URLs were sealed shows its own
            cast(TransportChoice, shown.transport),
            None if shown.tools is None else tuple(shown.tools),
            cast(AuthKind, shown.kind),
            headers,
            secret_url=_SECRET_URL in extras,
            oauth=grant,
            pins=pins,
            policy=policy if policy is not None else Policy(),
        )
    except ValidationError as exc:
        # A name an older Playa took and this one refuses (the reserved "mcp") says why.
        raise EntryRejected(str(exc) if exc.field == "name" else f"malformed: {exc}") from None
    if _SEALED_URL in extras and entry.shown_url != shown.url:
        raise EntryRejected("seal does not verify: the sealed URL does not match the shown one")
    return entry
