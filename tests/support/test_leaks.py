"""The canary suites' oracle finds every form of a credential a text shows, and flags no clean text."""

from __future__ import annotations

import base64
import json
import random
import string
from urllib.parse import quote

import pytest

from playa.core import REDACTED, Redactor, encoded_forms
from support.leaks import PIECE, decoded_encodings, leaks

KEY = "".join(random.Random(64).choices(string.ascii_letters + string.digits + "-._~+/", k=64))
OTHER = "sk-other-" + "".join(random.Random(7).choices(string.hexdigits.lower(), k=32))
SHORT = "k3y-value!"  # ten bytes: hex is decoded, base64 is not (the redactor's floors)
ACCENTED = "clé-secrète-" + "".join(random.Random(3).choices(string.ascii_letters, k=20))


@pytest.mark.parametrize("secret", [KEY, SHORT, ACCENTED], ids=["64", "short", "accented"])
def test_every_literal_form_of_the_secret_and_of_its_bearer_header_is_found(secret: str) -> None:
    for form in sorted(encoded_forms(secret) | encoded_forms(f"Bearer {secret}")):
        text = f"before <{form}> after"
        assert form in leaks(secret, text), form
        assert form in leaks(secret, text.encode()), form
        assert form in leaks([OTHER, secret], text), form


@pytest.mark.parametrize("secret", [KEY, OTHER, ACCENTED], ids=["64", "hex-shaped", "accented"])
def test_wrapped_base64_and_hex_in_either_case_with_any_separator_are_found(secret: str) -> None:
    digits = secret.encode().hex()
    for text in decoded_encodings(secret):
        found = leaks(secret, f"echo: {text} done")
        assert found, text
        if all(c in string.hexdigits + ":- " for c in text):
            assert digits in found, text
    # Found by decoding alone: no line of the narrow wrap holds a literal form.
    narrow = base64.urlsafe_b64encode(b"\x01" + secret.encode()).decode()
    lines = "\r\n".join(narrow[at : at + 7] for at in range(0, len(narrow), 7))
    assert not any(form in lines for form in encoded_forms(secret))
    assert len(leaks(secret, lines)) == 1


@pytest.mark.parametrize(
    "show",
    [json.dumps, repr, lambda value: repr(json.dumps(value))],
    ids=["json", "repr", "repr-of-json"],
)
def test_wrapped_base64_is_found_where_json_or_a_repr_escapes_its_line_breaks(show: object) -> None:
    # A request body carries a tool result as a JSON string: its lines are joined by "\n".
    assert callable(show)
    for text in decoded_encodings(KEY):
        shown = str(show({"content": f"echo: {text}"}))
        assert "\n" not in shown and leaks(KEY, shown), shown
        assert leaks(KEY, shown.replace("/", "\\/")), shown


def test_a_piece_of_the_secret_is_a_leak_only_where_pieces_are_asked_for() -> None:
    cut = f"shortened: {KEY[5 : 5 + PIECE]}..."
    assert leaks(KEY, cut) == []
    assert leaks(KEY, cut, pieces=True) == [KEY[5 : 5 + PIECE]]
    assert leaks(KEY, f"shortened: {KEY[5 : 5 + PIECE - 1]}...", pieces=True) == []


def test_clean_text_is_not_flagged() -> None:
    rng = random.Random(1)
    blob = base64.encodebytes(rng.randbytes(50_000)).decode()
    dump = "\n".join(":".join(f"{b:02X}" for b in rng.randbytes(32)) for _ in range(2000))
    others = [*encoded_forms(OTHER), *decoded_encodings(OTHER)]
    text = "\n".join(
        [
            blob,
            dump,
            *others,
            json.dumps({"authorization": f"Bearer {REDACTED}", "k": quote(REDACTED)}),
            KEY[: PIECE - 1] + " " + KEY[PIECE - 1 :],  # a space cuts it: not its base64 or hex either
        ]
    )
    assert leaks(KEY, text, pieces=False) == []
    assert leaks([KEY, SHORT, ACCENTED], text.encode()) == []
    assert leaks(OTHER, text)  # the text does hold the other's forms


@pytest.mark.parametrize("secret", [KEY, OTHER, ACCENTED], ids=["64", "hex-shaped", "accented"])
def test_what_the_redactor_leaves_of_each_encoding_is_clean(secret: str) -> None:
    # The oracle and the redactor agree: a run redacted whole but for a line with no part of
    # the key is no leak, and the same text unredacted is one.
    redactor = Redactor([f"Bearer {secret}"])
    for text in [*decoded_encodings(secret), *encoded_forms(secret)]:
        shown = f"echo:\n{text}\ndone"
        assert leaks(secret, shown), text
        assert leaks(secret, redactor.redact(shown), pieces=True) == [], text
