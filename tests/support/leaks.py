"""The canary suites' oracle: which forms of a credential a text shows.

A credential leaks when a text shows it in a form that gives it back:

- a literal form: the credential, and ``Bearer <credential>``, as the redactor lists them
  (:func:`~playa.core.encoded_forms`: as given, percent-encoded, JSON-escaped, base64 whole or at
  any of the three byte alignments inside a larger blob);
- its base64 cut by line breaks: the core of its base64 at any alignment, once every line break
  (LF or CR, or its escape ``\\n`` or ``\\r`` in JSON or a ``repr``, escaped once or more) is
  gone, an escaped ``/`` reads as ``/`` and URL-safe base64 reads as standard;
- its hex, once the separators (``:``, ``-``, spaces, line breaks and their escapes) are gone
  and upper case is lower;
- where a suite asks (``pieces=True``), any :data:`PIECE` characters of it in a row: a credential
  cut short is a leak too.

The decoded forms are found by normalising the text once (a few ``bytes.replace`` and
``bytes.translate`` passes) and searching it: a check costs one pass over the text per form,
never a decoding of its runs, so megabytes of logs and files stay cheap. The oracle is written
apart from the redactor on purpose, so that a mistake in one is not copied into the other.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterable
from typing import Final, NamedTuple

from playa.core import encoded_forms

__all__ = ["PIECE", "decoded_encodings", "leaks"]

PIECE: Final = 12
"""Characters of a credential in a row that a text may not show, in the suites that check pieces."""

_JOINED: Final = (bytes.maketrans(b"-_", b"+/"), b"\r\n")
"""Lines joined and URL-safe base64 read as standard."""
_DIGITS: Final = (bytes.maketrans(b"ABCDEF", b"abcdef"), b": -\r\n")
"""Hex digits without separators, in lower case."""


_ESCAPED_BREAK: Final = re.compile(rb"\\+[nr]")
"""A line break as JSON and ``repr`` write it, escaped once or more (the ``repr`` of a JSON body):
a request body shows a wrapped blob's lines so."""
_ESCAPED_SLASH: Final = re.compile(rb"\\+/")


def _unescaped(data: bytes) -> bytes:
    """``data`` without escaped line breaks, and with an escaped ``/`` as ``/``."""
    return _ESCAPED_SLASH.sub(b"/", _ESCAPED_BREAK.sub(b"", data))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _base64_cores(data: bytes) -> set[bytes]:
    """The standard base64 characters of ``data`` at each byte alignment inside a larger blob: those
    whose six bits all come from ``data``."""
    cores = set()
    for pad in range(3):
        encoded = base64.b64encode(bytes(pad) + data)
        cores.add(encoded[-(-8 * pad // 6) : 8 * (pad + len(data)) // 6])
    return cores


class _Forms(NamedTuple):
    literal: frozenset[bytes]
    base64: frozenset[bytes]
    hex: bytes


@functools.lru_cache(maxsize=1024)
def _forms(secret: str, pieces: bool) -> _Forms:
    literal = {_utf8(form) for form in encoded_forms(secret) | encoded_forms(f"Bearer {secret}")}
    if pieces:
        cut = {_utf8(secret[at : at + PIECE]) for at in range(len(secret) - PIECE + 1)}
        # A form that holds a piece is found through it: one search fewer per text.
        literal = cut | {form for form in literal if not any(piece in form for piece in cut)}
    data = _utf8(secret)
    return _Forms(frozenset(literal), frozenset(_base64_cores(data)), data.hex().encode())


def leaks(secrets: str | Iterable[str], text: str | bytes, *, pieces: bool = False) -> list[str]:
    """Every form of each of ``secrets`` that ``text`` shows, sorted; empty when it shows none.

    A literal form is given as it is (with ``pieces``, a form that holds a piece as its pieces);
    base64 found once the lines are joined as the core that was found (standard alphabet), and hex
    as its lower-case digits.
    """
    data = _utf8(text) if isinstance(text, str) else text
    unescaped = _unescaped(data)
    joined = unescaped.translate(*_JOINED)
    digits = unescaped.translate(*_DIGITS)
    found: set[bytes] = set()
    for secret in [secrets] if isinstance(secrets, str) else secrets:
        forms = _forms(secret, pieces)
        found |= {form for form in forms.literal if form in data}
        found |= {core for core in forms.base64 if core in joined}
        if forms.hex in digits:
            found.add(forms.hex)
    return sorted(form.decode("utf-8", "surrogatepass") for form in found)


def decoded_encodings(secret: str) -> list[str]:
    """Texts that show ``secret`` only to a reader that decodes: its ``Authorization`` header in
    base64 wrapped by MIME (76 columns, LF) and by PEM (64, CRLF), in URL-safe base64 at 7
    columns, each at every byte alignment; and its hex in either case with each separator."""
    header = _utf8(f"Authorization: Bearer {secret}\r\n")
    texts = []
    for pad in range(3):
        blob = bytes(range(1, pad + 1)) + header
        texts.append(base64.encodebytes(blob).decode())
        pem = base64.b64encode(blob).decode()
        texts.append("\r\n".join(pem[at : at + 64] for at in range(0, len(pem), 64)))
        narrow = base64.urlsafe_b64encode(blob).decode()
        texts.append("\n".join(narrow[at : at + 7] for at in range(0, len(narrow), 7)))
    for digits in (header.hex(), header.hex().upper()):
        pairs = [digits[at : at + 2] for at in range(0, len(digits), 2)]
        texts += [separator.join(pairs) for separator in ("", ":", " ", "-")]
    return texts
