from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from playa.exceptions import ConfigError, StoreError
from playa.mcp_remote.store import (
    Envelope,
    MalformedSeal,
    SealBroken,
    Sealer,
    UnknownSealVersion,
    WrongKey,
    canonical_json,
)

CANARY = "canary-9f3b2c7e-secret-value"
CONTEXT = {"scope": "console:default", "name": "docs", "url": "https://example.com/mcp"}


@pytest.fixture
def sealer() -> Sealer:
    return Sealer(b"a" * 32)


def test_a_sealed_header_map_opens_to_the_same_map(sealer: Sealer) -> None:
    headers = {"Authorization": f"Bearer {CANARY}", "X-Team": "blue"}
    envelope = sealer.seal(CONTEXT, headers)
    assert sealer.open(envelope, CONTEXT) == headers


def test_an_empty_header_map_is_sealed_and_opens_empty(sealer: Sealer) -> None:
    envelope = sealer.seal(CONTEXT, {})
    assert sealer.open(envelope, CONTEXT) == {}


def test_the_envelope_holds_no_header_value_and_names_its_key(sealer: Sealer) -> None:
    envelope = sealer.seal(CONTEXT, {"Authorization": CANARY})
    assert CANARY not in json.dumps(envelope)
    assert set(envelope) == {"v", "kid", "nonce", "ct"}
    assert envelope["v"] == 1
    assert envelope["kid"] == sealer.key_id


@pytest.mark.parametrize(
    "changed",
    [
        {**CONTEXT, "scope": "telegram:123"},
        {**CONTEXT, "name": "docs2"},
        {**CONTEXT, "url": "https://evil.example/mcp"},
        {**CONTEXT, "extra": None},
        {k: v for k, v in CONTEXT.items() if k != "url"},
    ],
)
def test_a_seal_does_not_open_with_a_different_context(sealer: Sealer, changed: dict[str, str]) -> None:
    envelope = sealer.seal(CONTEXT, {"Authorization": CANARY})
    with pytest.raises(SealBroken, match="seal does not verify: entry was edited, moved or forged"):
        sealer.open(envelope, changed)


def test_fields_a_delimiter_join_would_merge_stay_distinct(sealer: Sealer) -> None:
    one = {"name": "a|b", "url": "c"}
    other = {"name": "a", "url": "b|c"}
    assert canonical_json(one) != canonical_json(other)
    with pytest.raises(SealBroken):
        sealer.open(sealer.seal(one, {}), other)


def test_canonical_json_is_independent_of_key_order() -> None:
    assert canonical_json({"b": 1, "a": [None, "é"]}) == b'{"a":[null,"\\u00e9"],"b":1}'
    assert canonical_json({"a": [None, "é"], "b": 1}) == canonical_json({"b": 1, "a": [None, "é"]})


def _flip_bit(text: str, byte: int) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[byte] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


@pytest.mark.parametrize("byte", [0, 5, -1])
def test_a_flipped_ciphertext_bit_is_refused(sealer: Sealer, byte: int) -> None:
    envelope = sealer.seal(CONTEXT, {"Authorization": CANARY})
    tampered = {**envelope, "ct": _flip_bit(envelope["ct"], byte)}
    with pytest.raises(SealBroken):
        sealer.open(tampered, CONTEXT)


def test_a_flipped_nonce_bit_is_refused(sealer: Sealer) -> None:
    envelope = sealer.seal(CONTEXT, {})
    with pytest.raises(SealBroken):
        sealer.open({**envelope, "nonce": _flip_bit(envelope["nonce"], 3)}, CONTEXT)


@pytest.mark.parametrize("field", ["nonce", "ct"])
def test_a_nonce_or_ciphertext_from_another_seal_is_refused(sealer: Sealer, field: str) -> None:
    first = sealer.seal(CONTEXT, {"Authorization": "one"})
    second = sealer.seal(CONTEXT, {"Authorization": "two"})
    mixed = {**first, field: second[field]}  # type: ignore[literal-required]
    with pytest.raises(SealBroken):
        sealer.open(mixed, CONTEXT)


def _non_canonical(text: str) -> str:
    """Same bytes to a lenient decoder, but with non-zero padding bits."""
    assert text.endswith("=")
    body = text.rstrip("=")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet[alphabet.index(body[-1]) | 1]
    return body[:-1] + last + text[len(body) :]


@pytest.mark.parametrize(
    ("field", "mutate", "reason"),
    [
        ("ct", lambda s: s[:-1], "not valid base64"),
        ("ct", lambda s: s.rstrip("="), "not valid base64"),
        ("ct", _non_canonical, "not canonical base64"),
        ("ct", lambda s: s[:8] + "\n" + s[8:], "not valid base64"),
        ("ct", lambda s: s.replace("=", "") + "====", "not valid base64|not canonical"),
        ("ct", lambda s: "AAAA", "truncated"),
        ("nonce", lambda s: s[:-4], "wrong length"),
        ("nonce", lambda s: s + "AAAA", "wrong length"),
        ("nonce", lambda s: s[:-1] + "!", "not valid base64"),
        ("nonce", lambda s: s[:-1] + "é", "not base64 text"),
    ],
)
def test_truncated_or_non_canonical_base64_is_refused(
    sealer: Sealer, field: str, mutate: Callable[[str], str], reason: str
) -> None:
    # A one-byte map gives a ciphertext length that needs padding, so padding bits exist.
    envelope = sealer.seal(CONTEXT, {"A": "b"})
    assert envelope["ct"].endswith("=")
    tampered = {**envelope, field: mutate(envelope[field])}  # type: ignore[literal-required]
    with pytest.raises(MalformedSeal, match=reason):
        sealer.open(tampered, CONTEXT)


def test_a_ciphertext_cut_by_whole_base64_groups_does_not_verify(sealer: Sealer) -> None:
    envelope = sealer.seal(CONTEXT, {"A": "b"})
    with pytest.raises(SealBroken):
        sealer.open({**envelope, "ct": envelope["ct"][:-8]}, CONTEXT)


def test_a_non_canonical_spelling_decodes_to_the_same_bytes_so_only_the_strict_check_catches_it(
    sealer: Sealer,
) -> None:
    ct = sealer.seal(CONTEXT, {"A": "b"})["ct"]
    assert base64.b64decode(_non_canonical(ct)) == base64.b64decode(ct)


def test_a_seal_from_another_key_is_refused_as_such(sealer: Sealer) -> None:
    other = Sealer(b"b" * 32)
    envelope = other.seal(CONTEXT, {})
    with pytest.raises(WrongKey, match="sealed with another key"):
        sealer.open(envelope, CONTEXT)


def test_relabelling_a_foreign_seal_with_our_key_id_does_not_open_it(sealer: Sealer) -> None:
    envelope = Sealer(b"b" * 32).seal(CONTEXT, {})
    with pytest.raises(SealBroken):
        sealer.open({**envelope, "kid": sealer.key_id}, CONTEXT)


def test_a_seal_with_a_changed_key_id_is_refused(sealer: Sealer) -> None:
    envelope = sealer.seal(CONTEXT, {})
    with pytest.raises(WrongKey):
        sealer.open({**envelope, "kid": "0" * 16}, CONTEXT)
    with pytest.raises(MalformedSeal, match="key id"):
        sealer.open({**envelope, "kid": "XYZ"}, CONTEXT)


@pytest.mark.parametrize(("version", "error"), [(2, UnknownSealVersion), (0, UnknownSealVersion)])
def test_an_unknown_seal_version_is_refused(sealer: Sealer, version: int, error: type[StoreError]) -> None:
    envelope = sealer.seal(CONTEXT, {})
    with pytest.raises(error, match="unknown seal version"):
        sealer.open({**envelope, "v": version}, CONTEXT)


@pytest.mark.parametrize(
    "envelope",
    [None, [], "seal", {}, {"v": True}, {"v": "1"}, {"v": 1}, {"v": 1, "kid": 7, "nonce": "", "ct": ""}],
)
def test_a_missing_or_misshapen_seal_is_malformed(sealer: Sealer, envelope: object) -> None:
    with pytest.raises(MalformedSeal):
        sealer.open(envelope, CONTEXT)


def test_an_extra_field_in_the_envelope_is_refused(sealer: Sealer) -> None:
    envelope: dict[str, object] = dict(sealer.seal(CONTEXT, {}))
    envelope["note"] = "x"
    with pytest.raises(MalformedSeal, match="unexpected fields"):
        sealer.open(envelope, CONTEXT)


def test_the_key_id_depends_on_the_secret_only() -> None:
    assert Sealer(b"s" * 20).key_id == Sealer(b"s" * 20).key_id
    assert Sealer(b"s" * 20).key_id != Sealer(b"t" * 20).key_id
    assert len(Sealer(b"s" * 20).key_id) == 16


def test_the_sealer_repr_shows_only_the_key_id() -> None:
    secret = b"canary-secret-0123456789"
    sealer = Sealer(secret)
    assert repr(sealer) == f"Sealer(key_id={sealer.key_id!r})"
    assert "canary" not in repr(sealer)


def test_a_too_short_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 16 bytes"):
        Sealer(b"short")


def test_no_nonce_repeats_over_a_hundred_thousand_seals(sealer: Sealer) -> None:
    count = 100_000
    nonces = {sealer.seal({}, {})["nonce"] for _ in range(count)}
    assert len(nonces) == count


def test_two_seals_of_the_same_map_differ(sealer: Sealer) -> None:
    first: Envelope = sealer.seal(CONTEXT, {"A": "b"})
    second: Envelope = sealer.seal(CONTEXT, {"A": "b"})
    assert first["nonce"] != second["nonce"]
    assert first["ct"] != second["ct"]
