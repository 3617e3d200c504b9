"""The forms a secret takes in text: the literal strings a Redactor removes as they are.

A :class:`Redactor` is built once per change of a chat's secrets and then applied to every tool
result, error and command reply of that chat, so its construction may be slow and its scan must
be fast. What it removes, for each header value of at least :data:`MIN_SECRET_LENGTH` characters:

- the value as given, and the credential after an auth scheme (``Bearer x`` → ``x`` as well);
- each of those percent-encoded, JSON-escaped, and base64 / base64url encoded, including the
  part of a larger base64 blob that encodes the secret at any of the three byte alignments
  (see :func:`encoded_forms`): these literal forms are removed exactly where they occur;
- by decoding (``_decode``): a run of base64 characters, standard or URL-safe, cut by
  line breaks (LF or CRLF) at any width of at least ``_decode._NARROWEST`` characters, any number
  of them, that holds the value's base64 at any alignment across a break; and a run of hex
  digits, lower or upper case, with ``:``, space or ``-`` between the bytes or nothing, that
  holds the value's hex. A line break may be raw or written as an escape, as JSON and a
  ``repr`` write it (``\\n``, ``\\r\\n``), escaped once or more (``\\\\n``: the ``repr`` of a
  JSON text), and base64's ``/`` may be escaped as JSON may write it (``\\/``): a tool's JSON
  result that quotes a wrapped blob is decoded as the blob. Such a run is redacted whole, but
  for a first or last line that holds no part of the value (a label before a blob, a word
  after it) and a hex group that a word beside the run glues to it (``value 61 62``: the
  ``e``). A value with an auth scheme is
  decoded as its credential, and its scheme's lines go with it. Base64 is decoded for values of
  16 bytes or more, hex for 10 or more (``_decode._MIN_DECODED``).
"""

from __future__ import annotations

import base64
import json
import re
from typing import Final
from urllib.parse import quote, quote_plus

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "auth_credential",
    "encoded_forms",
    "is_http_token",
    "lower_escapes",
]

REDACTED: Final = "[redacted]"
"""What every match is replaced with."""

MIN_SECRET_LENGTH: Final = 8
"""Values shorter than this are never redacted (and the command layer refuses them).

Redacting a short string would rewrite unrelated text wherever it happens to occur (every
``abc`` of a result), and such a value is too weak to be worth protecting this way. The same
floor applies to every encoded form, which matters for base64: a core of ``k`` characters pins
only ``6k`` bits, and below 8 characters (48 bits) a large unrelated base64 blob would contain
it by chance and be corrupted, while the few bits it would hide tell an attacker next to nothing.
"""

_HTTP_TOKEN: Final = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
"""An HTTP token (RFC 9110 §5.6.2): what a header name and an auth scheme are made of."""
_TOKEN = re.compile(_HTTP_TOKEN)
_AUTH_SCHEME = re.compile(_HTTP_TOKEN + r" (?P<credential>[^ ].*)", re.DOTALL)


def is_http_token(text: str) -> bool:
    """Whether ``text`` is an HTTP token (RFC 9110 §5.6.2), as a header name must be."""
    return _TOKEN.fullmatch(text) is not None


def auth_credential(value: str) -> str | None:
    """The credential of an ``<scheme> <credential>`` header value, or None when it has no scheme."""
    match = _AUTH_SCHEME.fullmatch(value)
    return match.group("credential") if match else None


def _base64_forms(secret: bytes) -> set[str]:
    forms: set[str] = set()
    whole = base64.b64encode(secret).decode("ascii")
    forms.update((whole, whole.rstrip("=")))
    forms.update(core.decode("ascii") for core in _base64_cores(secret))
    return forms | {form.translate(_URLSAFE) for form in forms}


_URLSAFE: Final = str.maketrans("+/", "-_")
_URLSAFE_BYTES: Final = bytes.maketrans(b"+/", b"-_")


_PERCENT_ESCAPE: Final = re.compile(r"%[0-9A-Fa-f]{2}")
_UPPER_ESCAPE: Final = re.compile(r"%(?:[A-F][0-9A-Fa-f]|[0-9a-f][A-F])")


def lower_escapes(text: str) -> str:
    """``text`` with its percent-escapes in lower case, at the same positions (``%2F`` and ``%2f``,
    and a form mixing them, are one case)."""
    if "%" not in text or _UPPER_ESCAPE.search(text) is None:
        return text  # nothing to lower: looked for in C, not escape by escape
    rest = _PERCENT_ESCAPE.sub("", text)
    if rest == rest.lower():
        # Only the escapes have capitals (a secret's every-byte form is escapes alone): lowered
        # whole, in C, rather than escape by escape.
        return text.lower()
    return _PERCENT_ESCAPE.sub(lambda match: match.group().lower(), text)


def _base64_cores(secret: bytes) -> list[bytes]:
    """The standard base64 of ``secret`` at each of the three byte alignments inside a larger blob.

    Encoded behind ``pad`` stand-in bytes, only the characters whose 6 bits all come from the
    secret are kept: the leading ones mix in the neighbour's bits, and those past the secret's
    last whole 6 bits depend on whatever byte follows it.
    """
    cores = []
    for pad in range(3):
        encoded = base64.b64encode(bytes(pad) + secret)
        cores.append(encoded[-(-8 * pad // 6) : 8 * (pad + len(secret)) // 6])
    return cores


def _forms_of(secret: str) -> set[str]:
    data = secret.encode("utf-8", "surrogatepass")
    percent = quote(secret, safe="", errors="surrogatepass")
    # Every byte escaped: ``bytes.hex`` puts the separator in, in C (a per-byte format costs a
    # secret's learning ~20 µs).
    every_byte = f"%{data.hex('%').upper()}" if data else ""
    forms = {
        secret,
        percent,
        quote(secret, errors="surrogatepass"),
        quote_plus(secret, safe="", errors="surrogatepass"),
        every_byte,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        # JSON may escape '/' as well (PHP, some Java encoders).
        json.dumps(secret)[1:-1].replace("/", "\\/"),
    }
    # ``every_byte`` is escapes alone: lower-cased whole, it is what ``lower_escapes`` makes of it.
    forms |= {every_byte.lower(), *(lower_escapes(form) for form in forms - {every_byte} if "%" in form)}
    forms |= _base64_forms(data)
    return forms


def _plain_forms(secret: str) -> frozenset[str]:
    """The literal forms of ``secret`` (kept while it is held: ``_held.forms_of``)."""
    if len(secret) < MIN_SECRET_LENGTH:
        return frozenset()
    forms = _forms_of(secret)
    credential = auth_credential(secret)
    if credential is not None and len(credential) >= MIN_SECRET_LENGTH:
        forms |= _forms_of(credential)
    return frozenset(form for form in forms if len(form) >= MIN_SECRET_LENGTH)


def encoded_forms(secret: str) -> set[str]:
    """Every literal string whose presence in a text would leak ``secret``: what a Redactor removes as it is.

    The secret itself, the credential after its auth scheme if it has one, and for each of
    those: percent-encoding (``quote`` with ``safe=''`` and the default ``safe='/'``,
    ``quote_plus``, every byte escaped, and each of them with lower-case escapes), JSON string
    escaping (``ensure_ascii`` on and off, and with ``/`` escaped), standard and URL-safe
    base64 of its UTF-8 bytes with and without padding, and the stable core of its base64 at
    each of the three byte alignments inside a larger blob. Forms shorter than
    :data:`MIN_SECRET_LENGTH` are left out; a secret shorter than that has no forms at all.

    What a Redactor finds by decoding is not listed: a run of base64 that holds the secret cut
    by line breaks, and a run of hex that holds it (see the module docstring).
    """
    return set(_plain_forms(secret))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
