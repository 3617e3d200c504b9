"""Removes a chat's header values, and every encoded form of them, from text bound for the model.

A :class:`Redactor` is built once per change of a chat's secrets and then applied to every tool
result, error and command reply of that chat, so its construction may be slow and its scan must
be fast. What it removes, for each header value of at least :data:`MIN_SECRET_LENGTH` characters:

- the value as given, and the credential after an auth scheme (``Bearer x`` → ``x`` as well);
- each of those percent-encoded, JSON-escaped, and base64 / base64url encoded, including the
  part of a larger base64 blob that encodes the secret at any of the three byte alignments
  (see :func:`encoded_forms`): these literal forms are removed exactly where they occur;
- by decoding (:class:`_Decoder`): a run of base64 characters, standard or URL-safe, cut by
  line breaks (LF or CRLF) at any width of at least :data:`_NARROWEST` characters, any number
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
  16 bytes or more, hex for 10 or more (:data:`_MIN_DECODED`).

Not covered: base64 lines indented or joined by other whitespace, lines narrower than three
characters, hex cut by line breaks (a dump's lines, raw or escaped) in a text long enough for
the block filter (a text searched directly decodes every run of hex), hex that mixes cases or
separators, and any other transformation (base32, UTF-16, reversal, a value split over several
results). The block filter starts a decoding at a break escaped once or twice and at a ``/``
escaped once: a run whose breaks are escaped more deeply than that may pass it (a text searched
directly is decoded whatever the depth).

Why the scan is not a regular expression: CPython's ``re`` has no multi-literal (Aho–Corasick)
search. An alternation of a few hundred literals scans at ~5-10 MB/s, and even a search for one
character class manages ~180 MB/s; a ``str.replace`` loop over every form pays one full pass
per form (and a new copy of the text per form that matched). Nor is it a compiled Aho–Corasick
automaton: on the benchmark's 10 MB with 189 forms, ``pyahocorasick`` scans a ``str`` at
~35 MB/s and ``ahocorasick-rs`` at ~75 MB/s (~420 MB/s on bytes with its DFA), where this whole
redaction runs at ~370 MB/s (docs/benchmarks.md). The scan is a sampled block filter:

- the text is encoded as UTF-8 (with surrogates passed through), and so is every form: UTF-8
  is self-synchronising, so a form occurs in the text exactly where its bytes occur in the
  text's bytes, and the redacted bytes decode back to the text. An ASCII text is encoded at
  once (one copy of the same size). Any other is encoded :data:`_CHUNK` characters at a time
  and each chunk is scanned at once: for a large non-ASCII text CPython would map a fresh
  worst-case buffer (4 bytes a character) on every call, whose page faults cost as much as the
  encoding, and the scan reads bytes still in the cache. A form across the edge of two chunks
  lies within the seam of ``longest form - 1`` bytes on either side, which is scanned on its
  own (chunks are never shorter than a form);
- a form of at least ``stride + 3`` bytes holds, wherever it occurs, one whole 4-byte block that
  starts at a multiple of ``stride``. ``struct`` reads those sampled blocks as little-endian
  ints, a span at a time, and the intersection of the table's keys view with the sample checks
  them, both in C, against every block a form can show at such a place: some 40-50 ns per
  ``stride`` bytes (27 or more for ~32-character secrets), most of it making and freeing the
  object. An int hashes for free; as the blocks of forms share a small alphabet their low bits
  crowd, which a dict's probing spreads (a frozenset probes linearly first: ints in a frozenset
  measured no faster than 4-byte ``bytes``, whose hash is a SipHash; a dict's keys ~10 % faster).
  Measured and dropped: iterating a ``memoryview`` (as slow), 8-byte blocks (a shorter stride
  for no cheaper block), ``isdisjoint`` before the intersection (most spans of text full of
  secrets hit), tuples of characters sliced from the ``str`` itself with ``zip`` (~1.5 times
  slower: a tuple's hash), and 4-character ``str`` slices (~3 times slower);
- a hit's place in its span: the first bytes of the span's sampled blocks (an extended slice)
  are searched for the hit's first byte, and each candidate is compared with the sample. The
  forms that own that block at that place are confirmed against the bytes. Forms too short for
  the stride chosen are looked for with ``bytes.find`` over each chunk. The stride is chosen per
  Redactor to minimise the expected cost of both;
- a run is decoded only where the sampled scan points at it: the first sampled block of an
  encoding cut by breaks is either one of its own blocks at one of its first ``stride``
  offsets, or a block that holds one break (raw, or escaped once or twice: :data:`_NEWLINES`),
  and the table holds both (:class:`_Tables`), and the blocks of the encoding with its ``/``
  escaped. Base64 is decoded when such a block fails to confirm the literal form and a line
  break or a backslash lies in its run; hex, when one of its forms confirms, since its run goes
  whole. Decoding takes the run around the block (within the encoding's reach), drops escaped
  breaks with a regular expression if the run holds a backslash, drops the breaks and
  separators with ``bytes.translate`` (mapping URL-safe to standard, upper to lower case), and
  searches the value's encodings with ``bytes.find``; a base64 run counts as holding the value
  only where the decoded run holds more of it than its literal forms show, so an unbroken blob
  keeps its exact match. A block that holds fewer than two characters of an encoding beside an
  escaped break (``\\r\\n`` itself, ``r\\nA``) meets nearly every such break: it is entered once
  for all values (:data:`_ANY_BASE64`), and starts one look that finds the run, decodes it once
  and samples it for every value's blocks (:meth:`_Tables.look`), where a decoding per value
  would cost each a pass. Text without such runs costs nothing more than the larger table
  (~24,800 blocks for the benchmark's 20 secrets, where raw breaks alone took ~16,100: ~5-8 %
  of the benchmark's rate, measured beside the table of raw breaks in one process). JSON of the
  benchmark's text scans as fast as the text itself where its breaks were LF, and at ~0.7 of it
  where they were CRLF, whose escape ``\\r\\n`` is a whole block. A text searched
  directly (short texts, see :class:`Redactor`) finds its runs with
  a regular expression instead. Measured and dropped before decoding existed (docs/benchmarks.md,
  section 5): a second pass over every base64 run that holds a break, which costs more than the
  blocks;
- what survives is joined around REDACTED: for an ASCII text (``str.isascii`` is free) byte
  offsets are character offsets, so the text itself is sliced and nothing is decoded;
  otherwise the chunks are appended to one ``bytearray``, each match is overwritten in place
  with REDACTED and filler bytes that are never UTF-8, and decoding drops the filler
  (:func:`_cut_out`): the one fresh buffer is the result's.

Overlapping or touching matches are merged and replaced once, so the longest match always wins:
``Bearer <token>`` is never left as ``Bearer [redacted]`` beside a leaked scheme, nor as a
token with a visible tail.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import re
import struct
import sys
from collections.abc import Iterable, Iterator
from typing import ClassVar, Final
from urllib.parse import quote, quote_plus

__all__ = ["MIN_SECRET_LENGTH", "REDACTED", "Redactor", "auth_credential", "encoded_forms", "is_http_token"]

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

_BLOCK: Final = 4  # bytes per sampled block, read as a little-endian unsigned int ("<I")
# Rough costs on CPython 3.11, used only to pick a stride: one sampled block (unpack it, probe
# the table, free it), and one byte of a bytes.find pass.
_NS_PER_BLOCK: Final = 25.0
_NS_PER_FIND_BYTE: Final = 0.3
# Bytes of text per sample: a hit is located by a search of the span's first bytes, so not too
# large; each span costs a few Python-level steps, so not too small.
_SPAN: Final = 4096
# Past this the filter costs little next to the rest, while the table of blocks grows with the
# stride (one entry per form and offset), which matters for long secrets such as JWTs.
_MAX_STRIDE: Final = 64
# Characters encoded at a time (see the module docstring); 16K to 128K measure the same.
_CHUNK: Final = 1 << 16
# Characters up to which a text is searched for each form directly, and how many in all before
# the block filter is built (see Redactor). Searching costs 0.2-0.4 ns per character and form
# (more in a text with line breaks), and building ~200 µs per form: the budget is where they meet.
_DIRECT: Final = 4096
_DIRECT_BUDGET: Final = 400_000
# Forms whose blocks are entered into the filter between two pauses of Redactor.filter_steps
# (~0.2-0.5 ms).
_STEP_FORMS: Final = 8


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


_PERCENT_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def _lower_escapes(text: str) -> str:
    return _PERCENT_ESCAPE.sub(lambda m: m.group().lower(), text)


_MIN_DECODED: Final = 20
"""Characters an encoding needs to be looked for in decoded runs: base64 of 16 bytes or more, hex
of 10 bytes or more. The sampled scan must find a block of it wherever it occurs, so the
shortest of them bounds the stride (see :class:`_Tables`); a shorter one would slow every scan."""
_NARROWEST: Final = 3
"""Characters between two line breaks, at least, for a run's breaks to be followed: a narrower
wrap puts two breaks in one sampled block, which the table of blocks does not hold."""
_NEWLINES: Final = (b"\n", b"\r\n", b"\\n", b"\\r\\n", b"\\\\n", b"\\\\r\\\\n")
"""The line breaks a run's lines are joined by for the sampled scan: raw, escaped as JSON or a
``repr`` writes them, and escaped twice (the ``repr`` of a JSON text, JSON in a JSON string)."""
_LONGEST_NEWLINE: Final = max(map(len, _NEWLINES))
_BREAKS: Final = b"\r\n"
_HEX_SEPARATORS: Final = b": -\r\n"
_TO_STANDARD: Final = bytes.maketrans(b"-_", b"+/")
_TO_LOWER: Final = bytes.maketrans(b"ABCDEF", b"abcdef")
_BASE64_CLASS: Final = r"A-Za-z0-9+/=_\-\r\n\\"
"""Base64's characters, both alphabets, its padding, line breaks and the backslash of an escape
(``\\n``, ``\\/``: the ``n`` and ``/`` are base64 characters already)."""
_HEX_CLASS: Final = r"0-9A-Fa-f:\- \r\n"
_ESCAPE: Final = r"\\+[nr]"
"""A line break written as an escape, once or more: ``\\n``, ``\\\\n``, ``\\r``."""
_BASE64_RUN: Final = re.compile(f"[{_BASE64_CLASS}]*".encode())
# Possessive: the class runs at the speed of a class alone (an alternation per character is ~10
# times slower), and only an escape tries the other branch.
_HEX_RUN: Final = re.compile(f"(?:[{_HEX_CLASS}]++|{_ESCAPE})*".encode())
_HEX_RUN_BACK: Final = re.compile(f"(?:[{_HEX_CLASS}]++|[nr]\\\\+)*".encode())
"""A run of hex read backwards (in the reversed bytes): an escape shows its letter first."""
_BREAK_GAP: Final = re.compile(f"(?:[\r\n]|{_ESCAPE})*".encode())
_BREAK_GAP_BACK: Final = re.compile(b"(?:[\r\n]|[nr]\\\\+)*")
_SEPARATOR_GAP: Final = re.compile(f"(?:[: \\-\r\n]|{_ESCAPE})*".encode())
_SEPARATOR_GAP_BACK: Final = re.compile(b"(?:[: \\-\r\n]|[nr]\\\\+)*")
_GAP_LOOK: Final = 64
"""Bytes before a place that are read backwards for the breaks or separators that end there."""
_WORD_BYTES: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
"""What glues a hex group at a run's edge to a word beside it (``value 61 62``: the ``e``)."""
_BREAK: Final = re.compile(b"[\r\n]")
_SEPARATOR: Final = re.compile(b"[: \\-\r\n]")
# The same with escapes, for a run that holds a backslash (an alternation searches ~3 times slower).
_ESCAPED_BREAK_OR_BREAK: Final = re.compile(f"[\r\n]|{_ESCAPE}".encode())
_ESCAPED_BREAK_OR_SEPARATOR: Final = re.compile(f"[: \\-\r\n]|{_ESCAPE}".encode())
_ESCAPED_BREAK: Final = re.compile(_ESCAPE.encode())
_ESCAPED_SLASH: Final = re.compile(rb"\\+/")
_BACKSLASH: Final = ord("\\")


def _unescaped(raw: bytes) -> bytes:
    """``raw`` without its escaped line breaks, and with an escaped ``/`` (JSON's ``\\/``) as ``/``."""
    if b"\\" not in raw:
        return raw
    return _ESCAPED_SLASH.sub(b"/", _ESCAPED_BREAK.sub(b"", raw))


def _escaped_slashes(encoding: bytes) -> bytes:
    """``encoding`` as JSON may write it, every ``/`` escaped (PHP, some Java encoders)."""
    return encoding.replace(b"/", b"\\/")


_NEVER: Final = b"\xff"
"""Never in UTF-8: the pattern of a block that only starts a decoding (see :class:`_Tables`).
Followed by a byte, with a shift of 1: of a block that starts inside a break, which starts a
decoding only where that byte of the break comes before it."""
_LOOK_STRIDE: Final = _MIN_DECODED - _BLOCK + 1
"""Bytes between the blocks of a decoded run that :meth:`_Tables.look` samples: an encoding that a
decoding finds is long enough to hold one of them wherever it lies."""
_ANY_BASE64: Final = b"\xfe"
"""Never in UTF-8: the pattern of a block that holds fewer than two characters of an encoding
beside an escaped break (``\\r\\n``, ``r\\nA``), so that any escaped break meets it: it starts
one look for every value's base64 at once (:meth:`_Tables.look`), not a decoding per value."""


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


def _decoders_of(value: str, whole_value: str | None = None) -> list[_Decoder]:
    """The decoders of one value: its base64 and its hex, each if long enough (:data:`_MIN_DECODED`).

    ``whole_value`` is the header value that ``value`` is the credential of: its encodings are
    looked for as well once a run is decoded, so that a redacted run keeps no line of them.
    """
    data = _utf8(value)
    also = _utf8(whole_value) if whole_value is not None else None
    decoders = []
    cores = _base64_cores(data)
    if min(map(len, cores)) >= _MIN_DECODED:
        decoders.append(
            _Decoder(
                whole=False,
                targets=cores,
                extent=_base64_cores(also) if also is not None else (),
                wrappable={*cores, *(core.translate(_URLSAFE_BYTES) for core in cores)},
                triggers=(),
            )
        )
    lower = data.hex().encode()
    if len(lower) >= _MIN_DECODED:
        upper = lower.upper()
        separated = {
            separator.join(form[at : at + 2] for at in range(0, len(form), 2))
            for form in (lower, upper)
            for separator in (b":", b" ", b"-")
        }
        decoders.append(
            _Decoder(
                whole=True,
                targets=[lower],
                extent=[also.hex().encode()] if also is not None else (),
                wrappable=(),
                triggers={lower, upper, *separated},
            )
        )
    return decoders


@functools.lru_cache(maxsize=256)
def _decoders(secret: str) -> tuple[_Decoder, ...]:
    """The decoders of ``secret`` (kept like :func:`_plain_forms`).

    A value with a credential (``Bearer x``) is decoded as its credential: the base64 of the
    value holds the credential's at one of its alignments, and its hex holds the credential's.
    The value itself is decoded only where its credential is too short to be.
    """
    if len(secret) < MIN_SECRET_LENGTH:
        return ()
    decoders = []
    credential = auth_credential(secret)
    if credential is not None and len(credential) >= MIN_SECRET_LENGTH:
        decoders = _decoders_of(credential, secret)
    kinds = {decoder.whole for decoder in decoders}
    return (*decoders, *(decoder for decoder in _decoders_of(secret) if decoder.whole not in kinds))


def _forms_of(secret: str) -> set[str]:
    data = secret.encode("utf-8", "surrogatepass")
    percent = quote(secret, safe="", errors="surrogatepass")
    every_byte = "".join(f"%{byte:02X}" for byte in data)
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
    forms |= {_lower_escapes(form) for form in forms if "%" in form}
    forms |= _base64_forms(data)
    return forms


@functools.lru_cache(maxsize=256)
def _plain_forms(secret: str) -> frozenset[str]:
    """The literal forms of ``secret``; kept for the latest secrets, as a chat's
    redactor and the log gate both learn its credentials when it opens."""
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


_REDACTED_BYTES: Final = REDACTED.encode()
_FILLER: Final = b"\xff"  # never in UTF-8: what is left of a match after REDACTED (see _cut_out)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _choose_stride(lengths: list[int], shortest_encoding: int | None = None) -> int:
    """The sampling stride (0 for no block filter) of least expected cost per byte of text.

    With decoders (``shortest_encoding`` the shortest of their encodings), there is a block filter, and the
    stride leaves each encoding long enough to hold a sampled block wherever it occurs.
    """
    best_stride, best_cost = (
        0,
        _NS_PER_FIND_BYTE * len(lengths) if shortest_encoding is None else float("inf"),
    )
    top = min(_MAX_STRIDE, max(lengths, default=0) - _BLOCK + 1)
    if shortest_encoding is not None:
        top = min(top, shortest_encoding - _BLOCK + 1)
    for stride in range(_BLOCK, top + 1):
        short = sum(1 for n in lengths if n < stride + _BLOCK - 1)
        cost = _NS_PER_BLOCK / stride + _NS_PER_FIND_BYTE * short
        if cost < best_cost:
            best_stride, best_cost = stride, cost
    return best_stride


def _kept(spans: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """The (start, end) of the parts between the merged ``spans``: what survives redaction."""
    spans.sort()
    kept: list[tuple[int, int]] = []
    done = 0
    start, end = spans[0]
    for next_start, next_end in spans[1:]:
        if next_start <= end:
            end = max(end, next_end)
            continue
        kept.append((done, start))
        done = end
        start, end = next_start, next_end
    kept += ((done, start), (end, length))
    return kept


def _cut_out(encoded: bytearray, spans: list[tuple[int, int]], surrogates: bool) -> str:
    """The text ``encoded`` holds (UTF-8), with each of the merged ``spans`` replaced by REDACTED.

    In place: each span is overwritten by REDACTED and as many 0xFF bytes as it has left, which
    are never UTF-8, and decoding drops them. No copy of the encoded text is made, and the one
    fresh buffer is the result's. A span shorter than REDACTED, or a text with lone surrogates
    (encoded with ``surrogatepass``, which "ignore" would drop), takes a copy without the filler.
    """
    kept = _kept(spans, len(encoded))
    gaps = [(end, start) for (_, end), (start, _) in itertools.pairwise(kept)]
    if any(stop - start < len(_REDACTED_BYTES) for start, stop in gaps):
        view = memoryview(encoded)
        return _REDACTED_BYTES.join([view[start:end] for start, end in kept]).decode("utf-8", "surrogatepass")
    for start, stop in gaps:
        encoded[start:stop] = _REDACTED_BYTES + _FILLER * (stop - start - len(_REDACTED_BYTES))
    if surrogates:
        return encoded.replace(_FILLER, b"").decode("utf-8", "surrogatepass")
    return encoded.decode("utf-8", "ignore")


def _run_end(run: re.Pattern[bytes], data: bytes, start: int, stop: int = sys.maxsize) -> int:
    """Where the run of ``run``'s characters that starts at ``start`` ends (``stop`` at most)."""
    match = run.match(data, start, stop)
    assert match is not None  # the pattern matches the empty run too
    return match.end()


def _occurrences(data: bytes, needle: bytes) -> int:
    """How many times ``needle`` occurs in ``data``, overlapping ones included."""
    count = 0
    at = data.find(needle)
    while at >= 0:
        count += 1
        at = data.find(needle, at + 1)
    return count


class _Decoder:
    """One value's base64 or hex, as a run of base64 or hex that holds it reads once decoded.

    Decoding a run means dropping its line breaks (and for hex its separators ``:``, space and
    ``-``) and mapping URL-safe base64 to standard, or hex to lower case: what is left holds one
    of :attr:`targets` wherever the run encodes the value, however the run was wrapped. Base64
    that shows one of its literal forms (:attr:`wrappable`) unbroken is left to those forms,
    whose match is exact; a run that holds the value only decoded is redacted whole. Hex has no
    literal form: a run of hex that holds the value is redacted whole, in either case, with any
    of the separators or none.
    """

    __slots__ = (
        "back",
        "delete",
        "extent",
        "gap",
        "gap_back",
        "reach",
        "run",
        "table",
        "targets",
        "triggers",
        "whole",
        "wrappable",
    )

    def __init__(
        self,
        *,
        whole: bool,
        targets: Iterable[bytes],
        extent: Iterable[bytes],
        wrappable: Iterable[bytes],
        triggers: Iterable[bytes],
    ) -> None:
        self.whole = whole
        self.targets = tuple(sorted(set(targets)))
        """What a decoded run holds where it encodes the value."""
        self.extent = self.targets + tuple(sorted(set(extent) - set(self.targets)))
        """The targets and what a decoded run holds of the header value they are the credential
        of: a redacted run keeps no line of either."""
        self.wrappable = tuple(sorted(set(wrappable)))
        """Encodings whose blocks that hold a line break start a decoding (see :class:`_Tables`)."""
        self.triggers = tuple(sorted(set(triggers)))
        """Encodings whose match starts a decoding (hex, whose runs are redacted whole)."""
        self.run = _HEX_RUN if whole else _BASE64_RUN
        self.back = _HEX_RUN_BACK if whole else _BASE64_RUN
        """The run read backwards, in the reversed bytes."""
        self.gap = _SEPARATOR_GAP if whole else _BREAK_GAP
        self.gap_back = _SEPARATOR_GAP_BACK if whole else _BREAK_GAP_BACK
        self.table = _TO_LOWER if whole else _TO_STANDARD
        self.delete = _HEX_SEPARATORS if whole else _BREAKS
        longest = max(len(_escaped_slashes(encoding)) for encoding in (*self.wrappable, *self.triggers))
        # The longest stretch of text an occurrence can take: its '/' escaped, and the longest
        # of _NEWLINES after every _NARROWEST characters.
        self.reach = longest + _LONGEST_NEWLINE * (-(-longest // _NARROWEST))
        """Bytes on either side of a block of an occurrence within which the occurrence lies."""

    def decoded(self, raw: bytes, targets: tuple[bytes, ...]) -> tuple[list[int], list[int], int]:
        """Where the run ``raw``, decoded, holds ``targets``: the starts and ends of their
        occurrences in the decoded run, and the decoded run's length."""
        decoded = _unescaped(raw).translate(self.table, self.delete)
        starts: list[int] = []
        ends: list[int] = []
        for target in targets:
            at = decoded.find(target)
            while at >= 0:
                starts.append(at)
                ends.append(at + len(target))
                at = decoded.find(target, at + 1)
        return starts, ends, len(decoded)

    def length(self, raw: bytes) -> int:
        """The length of ``raw`` decoded."""
        return len(_unescaped(raw).translate(None, self.delete))

    def gap_end(self, raw: bytes, at: int, stop: int, escapes: bool) -> int:
        """Where the breaks (and separators) that start at ``raw[at]`` end, ``stop`` at the latest;
        escaped breaks count only with ``escapes`` (``raw`` holds a backslash)."""
        if escapes:
            return _run_end(self.gap, raw, at, stop)
        return stop - len(raw[at:stop].lstrip(self.delete))

    def gap_start(self, raw: bytes, floor: int, at: int, escapes: bool) -> int:
        """Where the breaks (and separators) that end at ``raw[at]`` start, ``floor`` at the earliest."""
        if escapes:
            low = max(floor, at - _GAP_LOOK)
            return at - _run_end(self.gap_back, raw[low:at][::-1], 0)
        return floor + len(raw[floor:at].rstrip(self.delete))

    @staticmethod
    def last_gap(raw: bytes, first: int, last: int, separators: bytes, escapes: bool) -> int:
        """Where the last break or separator (one of ``separators``, or with ``escapes`` an escaped
        break) in ``raw[first:last]`` starts; below ``first`` when there is none."""
        at = max(raw.rfind(byte, first, last) for byte in separators)
        if escapes:
            escaped = max(raw.rfind(b"\\n", first, last), raw.rfind(b"\\r", first, last))
            if escaped > at:
                at = escaped
                while at > first and raw[at - 1] == _BACKSLASH:
                    at -= 1
        return at

    def holds(self, raw: bytes) -> tuple[list[int], list[int], int] | None:
        """What :meth:`decoded` tells of the run ``raw``, if it holds the value where its literal
        forms do not show it."""
        found = self.decoded(raw, self.targets)
        count = len(found[0])
        if count and (self.whole or count > sum(map(raw.count, self.wrappable))):
            return found
        return None

    def edges(
        self,
        raw: bytes,
        glued_before: bool,
        glued_after: bool,
        found: tuple[list[int], list[int], int] | None = None,
    ) -> tuple[int, int]:
        """The part of the run ``raw`` to redact.

        Without the line breaks (and separators) at its ends, and without a first or last line
        that holds no part of the value: a label or a word on the line before or after a blob
        joins its run. For hex, a group at an edge that a word beside the run glues to it
        (``value 61 62``: the ``e``) goes the same way.
        """
        escapes = _BACKSLASH in raw
        first = self.gap_end(raw, 0, len(raw), escapes)
        last = self.gap_start(raw, first, len(raw), escapes)
        # A separator between the word and the run's first group unglues them.
        glued_before, glued_after = glued_before and first == 0, glued_after and last == len(raw)
        if found is None or len(self.extent) > len(self.targets):
            found = self.decoded(raw, self.extent)
        starts, ends, length = found
        if not starts:
            return first, last
        # What lies before `first` and after `last` decodes to nothing.
        if escapes:
            search = _ESCAPED_BREAK_OR_SEPARATOR if self.whole and glued_before else _ESCAPED_BREAK_OR_BREAK
        else:
            search = _SEPARATOR if self.whole and glued_before else _BREAK
        cut = search.search(raw, first, last)
        if cut is not None:
            at = cut.start()
            if min(starts) >= self.length(raw[first:at]):
                first = self.gap_end(raw, at, last, escapes)
        separators = self.delete if self.whole and glued_after else _BREAKS
        at = self.last_gap(raw, first, last, separators, escapes)
        if at >= first and max(ends) <= length - self.length(raw[at:last]):
            last = self.gap_start(raw, first, at, escapes)
        return first, last

    def run_at(
        self, data: bytes, start: int, end: int, found: tuple[list[int], list[int], int] | None = None
    ) -> tuple[int, int]:
        """The span to redact of the run around ``data[start:end]``: the whole run if ``found``
        tells what it holds (:meth:`holds`)."""
        if found is None:
            run = self.run
            width = self.reach
            while True:
                low, high = max(0, start - width), start
                start -= _run_end(self.back, data[low:high][::-1], 0)
                if start > low or low == 0:
                    break
                width *= 4
            end = _run_end(run, data, end)
        first, last = self.edges(
            data[start:end],
            start > 0 and data[start - 1] in _WORD_BYTES,
            end < len(data) and data[end] in _WORD_BYTES,
            found,
        )
        return start + first, start + last

    def find(self, data: bytes, position: int) -> tuple[int, int, tuple[int, int] | None]:
        """Decode the run around the block at ``position``: the span to redact, if it holds the value.

        First the part of ``data`` where every occurrence has been looked at: a later block of
        the value there needs no look. The block belongs to an occurrence, if any, that holds a
        line break and lies within :attr:`reach` of the block.
        """
        reach = self.reach
        # Further ahead than behind: in a long run a later block then needs no look of its own,
        # so a run whose blocks all hit costs its length, a few times over, and no more.
        low, high = max(0, position - reach), position + 4 * reach
        run = self.run
        end = _run_end(run, data, position, high)
        start = position - _run_end(self.back, data[low:position][::-1], 0)
        # Where the run goes on past what is looked at, an occurrence may cross the edge.
        whole_start, whole_end = start > low or low == 0, end < high
        raw = data[start:end]
        # Without a break, raw or escaped, or an escaped '/', a run shows nothing its literal
        # forms do not.
        if (b"\n" in raw or b"\\" in raw) and (found := self.holds(raw)):
            span = self.run_at(data, start, end, found if whole_start and whole_end else None)
            return span[0], span[1], span
        return (start if whole_start else start + reach), (end if whole_end else end - reach), None


_Owner = tuple[bytes, int, _Decoder | None]
"""A pattern that holds a block, the block's offset in it, and its decoder if the block may
belong to an encoding that a decoding finds (see :class:`_Tables`)."""


@functools.lru_cache(maxsize=256)
def _sampler(stride: int, count: int) -> struct.Struct:
    """Reads ``count`` blocks of 4 bytes, ``stride`` bytes apart."""
    gap = f"{stride - _BLOCK}x" if stride > _BLOCK else ""
    return struct.Struct("<" + ("I" + gap) * (count - 1) + "I")


def _block(data: bytes, at: int = 0) -> int:
    """The block of ``data`` at ``at`` as the sampler reads it."""
    return int.from_bytes(data[at : at + _BLOCK], "little")


class _Tables:
    """The sampled block filter over a Redactor's forms and decoders (see the module docstring).

    Built for the first text too long to search for each form directly, or by a caller that
    steps through :meth:`steps`; used only once complete, never changed after.
    """

    __slots__ = (
        "_decoders",
        "_patterns",
        "base64",
        "base64_blocks",
        "base64_reach",
        "blocks",
        "chunk",
        "max_length",
        "owners",
        "per_span",
        "short",
        "span",
        "stride",
    )

    def __init__(self, patterns: tuple[bytes, ...], decoders: tuple[_Decoder, ...]) -> None:
        """Choose the stride; the table of blocks is filled by :meth:`steps`."""
        lengths = [len(pattern) for pattern in patterns]
        # An occurrence that a decoding finds lies within `reach` of a block of it.
        self.max_length = max([*lengths, *(decoder.reach + _BLOCK for decoder in decoders)], default=0)
        # Every encoding that a decoding finds must hold a sampled block wherever it occurs.
        shortest = min(
            (len(encoding) for decoder in decoders for encoding in (*decoder.wrappable, *decoder.triggers)),
            default=None,
        )
        self.stride = _choose_stride(lengths, shortest)
        self.short: tuple[bytes, ...] = tuple(
            pattern for pattern in patterns if not self.stride or len(pattern) < self.stride + _BLOCK - 1
        )
        self._patterns = tuple(pattern for pattern in patterns if pattern not in self.short)
        self._decoders = decoders
        self.base64 = tuple(decoder for decoder in decoders if not decoder.whole)
        self.base64_reach = max((decoder.reach for decoder in self.base64), default=0)
        # Every block of every base64 target, at every offset: a decoded run sampled every
        # _LOOK_STRIDE bytes meets one of them wherever it holds a target (see look).
        blocks: dict[int, dict[_Decoder, None]] = {}
        for decoder in self.base64:
            for target in decoder.targets:
                for at in range(len(target) - _BLOCK + 1):
                    blocks.setdefault(_block(target, at), {})[decoder] = None
        self.base64_blocks = {block: tuple(decoders) for block, decoders in blocks.items()}
        self.owners: dict[int, tuple[_Owner, ...]] = {}
        self.blocks = self.owners.keys()
        # Whole forms fit in a chunk, so an occurrence spans at most two chunks.
        self.chunk = max(_CHUNK, self.max_length)
        self.per_span = max(1, _SPAN // (self.stride or _BLOCK))
        self.span = _sampler(self.stride or _BLOCK, self.per_span)

    def look(
        self,
        data: bytes,
        position: int,
        done: dict[_Decoder, tuple[int, int]],
        undecided: list[_Decoder] | None,
    ) -> list[_Decoder] | None:
        """``undecided`` and the decoders of base64 whose encoding the run around ``position`` may hold.

        For a block that any escaped break meets (:data:`_ANY_BASE64`): the run is found and
        decoded once, and searched for every value's encodings, where a decoding per value would
        cost each of them a pass over the run. What a decoder is not given has been looked at.
        """
        reach = self.base64_reach
        low, high = max(0, position - reach), position + 4 * reach
        end = _run_end(_BASE64_RUN, data, position, high)
        start = position - _run_end(_BASE64_RUN, data[low:position][::-1], 0)
        if end - start < _MIN_DECODED:
            return undecided  # too short to hold an encoding: most escaped breaks in prose and JSON
        looked = (start if start > low or low == 0 else start + reach), (end if end < high else end - reach)
        decoded = _unescaped(data[start:end]).translate(_TO_STANDARD, _BREAKS)
        count = (len(decoded) - _BLOCK) // _LOOK_STRIDE + 1
        found: dict[_Decoder, None] = {}
        if count > 0:
            blocks = self.base64_blocks
            for block in blocks.keys() & _sampler(_LOOK_STRIDE, count).unpack_from(decoded):
                found.update(dict.fromkeys(blocks[block]))
        for decoder in self.base64:
            if decoder in found:
                if undecided is None:
                    undecided = [decoder]
                elif decoder not in undecided:
                    undecided.append(decoder)
            else:
                done[decoder] = looked
        return undecided

    def steps(self) -> Iterator[None]:
        """Fill the table of blocks, pausing after every :data:`_STEP_FORMS` forms, a decoder's
        triggers, and each of its wrappable encodings."""
        owners: dict[int, dict[_Owner, None]] = {}
        stride = self.stride
        decoder_of = {encoding: decoder for decoder in self._decoders for encoding in decoder.wrappable}
        for number, pattern in enumerate(self._patterns, 1):
            # The sampled block can start at any of the first `stride` offsets of an occurrence.
            decoder = decoder_of.get(pattern)
            for offset in range(stride):
                owners.setdefault(_block(pattern, offset), {})[pattern, offset, decoder] = None
            if number % _STEP_FORMS == 0:
                yield
        # An encoding that a decoding finds: the first sampled block of an occurrence lies within
        # its first `stride + 3` bytes. Cut by line breaks (at least _NARROWEST characters apart),
        # that block is either a block of the encoding at one of its first `stride` offsets, or a
        # block that holds one break (LF or CRLF) cut at one of its first `stride + 3` places, however
        # many breaks came before: those blocks start a decoding of the run around them. Base64's
        # own blocks are its literal cores' (above), which decode when they fail to confirm; hex's
        # are the triggers', which decode when they confirm as well, since its runs go whole.
        for decoder in self._decoders:
            for trigger in decoder.triggers:
                for first in range(stride):
                    # The occurrence's sampled blocks lie `stride` apart from `first` on, and one
                    # of them is enough: one that is in the table already if it can, and not one
                    # of digits alone, which would meet every long number in the text.
                    places = range(first, len(trigger) - _BLOCK + 1, stride)
                    blocks = [(_block(trigger, at), at) for at in places]
                    block, offset = min(
                        blocks,
                        key=lambda pair: (
                            trigger[pair[1] : pair[1] + _BLOCK].isdigit(),
                            pair[0] not in owners,
                        ),
                    )
                    owners.setdefault(block, {})[trigger, offset, decoder] = None
            yield
            for wrappable in decoder.wrappable:
                # JSON may escape its '/' as well: where that changes a block the first sampled
                # block of an occurrence can be, the escaped encoding's blocks start a decoding too.
                escaped = _escaped_slashes(wrappable)
                encodings = [wrappable]
                if escaped[: stride + _BLOCK] != wrappable[: stride + _BLOCK]:
                    encodings.append(escaped)
                    for offset in range(stride):
                        if _BACKSLASH in escaped[offset : offset + _BLOCK]:
                            owners.setdefault(_block(escaped, offset), {})[_NEVER, 0, decoder] = None
                for encoding in encodings:
                    for cut in range(1, min(stride + _BLOCK, len(encoding))):
                        if encoding[cut - 1] == _BACKSLASH:
                            continue  # never inside an escaped '/'
                        for newline in _NEWLINES:
                            wrapped = encoding[:cut] + newline + encoding[cut:]
                            for offset in range(max(0, cut - _BLOCK + 1), min(stride, cut + len(newline))):
                                # Characters of the encoding in the block: those outside the break.
                                own = _BLOCK - (min(offset + _BLOCK, cut + len(newline)) - max(offset, cut))
                                if own < 2:
                                    owner: _Owner = (_ANY_BASE64, 0, None)
                                elif cut < offset:
                                    # It starts inside the break (``nABC``, the end of ``\\n``): the
                                    # break's byte before it must be there too.
                                    owner = (_NEVER + wrapped[offset - 1 : offset], 1, decoder)
                                else:
                                    owner = (_NEVER, 0, decoder)
                                owners.setdefault(_block(wrapped, offset), {})[owner] = None
                yield
        self.owners = {block: tuple(pairs) for block, pairs in owners.items()}
        # A dict's keys view: its intersection with a sample probes the dict, which spreads keys
        # that share their low bits (see the module docstring).
        self.blocks = self.owners.keys()


_BASE64_RUNS: Final = re.compile(f"(?<![{_BASE64_CLASS}])[{_BASE64_CLASS}]{{{_MIN_DECODED},}}")
_HEX_RUNS: Final = re.compile(f"(?<![{_HEX_CLASS}])[{_HEX_CLASS}]{{{_MIN_DECODED},}}")
_ESCAPED_HEX_RUNS: Final = re.compile(f"(?<![{_HEX_CLASS}])(?:[{_HEX_CLASS}]|{_ESCAPE}){{{_MIN_DECODED},}}")
"""Runs of hex whose lines may be joined by escaped breaks, for a text that holds a backslash."""
_WORD_CHARACTERS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _decoded_in(text: str, decoders: tuple[_Decoder, ...], found: list[tuple[int, int]]) -> None:
    """Add the span of every run of base64 or hex in ``text`` that one of ``decoders`` finds."""
    hex_runs = _ESCAPED_HEX_RUNS if "\\" in text else _HEX_RUNS
    for runs, whole in ((_BASE64_RUNS, False), (hex_runs, True)):
        kind = [decoder for decoder in decoders if decoder.whole is whole]
        # A run of base64 that holds no line break (raw or escaped) nor an escaped '/' holds
        # nothing its literal forms do not show.
        if not kind or (not whole and "\n" not in text and "\\" not in text):
            continue
        for match in runs.finditer(text):
            raw = match.group().encode("ascii")
            if not whole and b"\n" not in raw and b"\\" not in raw:
                continue
            for decoder in kind:
                if decoded := decoder.holds(raw):
                    start, end = match.span()
                    first, last = decoder.edges(
                        raw,
                        start > 0 and text[start - 1] in _WORD_CHARACTERS,
                        end < len(text) and text[end] in _WORD_CHARACTERS,
                        decoded,
                    )
                    found.append((start + first, start + last))
                    break


class Redactor:
    """Replaces a fixed set of secrets, and their encoded forms, with :data:`REDACTED`.

    Immutable and safe to share between tasks. ``redact`` is the one verb; a text with nothing
    to redact is returned as the same object.

    The block filter costs milliseconds and hundreds of kilobytes per secret to build, and most
    texts are short (tool definitions, errors, replies, prompt sections): a text of up to
    :data:`_DIRECT` characters is searched for each form directly, which needs nothing built.
    The filter is built for the first longer text, or once :data:`_DIRECT_BUDGET` characters
    have been searched directly (what the direct searches cost by then is about what building
    it costs): then :attr:`filter_wanted` asks a caller that can pause to build it a step at a
    time (:meth:`filter_steps`), and the text after twice the budget builds it at once. Every
    text is scanned with it from then on.
    """

    EMPTY: ClassVar[Redactor]

    __slots__ = (
        "_decoders",
        "_forms",
        "_min_length",
        "_patterns",
        "_searched",
        "_secret_count",
        "_skipped",
        "_tables",
    )

    def __init__(self, secrets: Iterable[str] = (), *, literal: Iterable[str] = ()) -> None:
        """Prepare the scan for ``secrets``; values under MIN_SECRET_LENGTH are ignored and counted.

        ``literal`` strings are removed as they are, without encoded forms (pieces of a secret
        that a library cut, say); those under MIN_SECRET_LENGTH are ignored too.
        """
        values = set(secrets)
        kept = {value for value in values if len(value) >= MIN_SECRET_LENGTH}
        self._secret_count = len(kept)
        self._skipped = len(values) - len(kept)
        forms: set[str] = {piece for piece in literal if len(piece) >= MIN_SECRET_LENGTH}
        decoders: dict[_Decoder, None] = {}
        for value in kept:
            forms |= _plain_forms(value)
            decoders.update(dict.fromkeys(_decoders(value)))
        # Sorted so that two redactors over the same secrets behave identically.
        self._forms: tuple[str, ...] = tuple(sorted(forms))
        self._decoders: tuple[_Decoder, ...] = tuple(decoders)
        self._patterns: tuple[bytes, ...] = tuple(_utf8(form) for form in self._forms)
        # In characters: a text shorter than every form is returned before it is even encoded.
        self._min_length = min((len(form) for form in self._forms), default=0)
        self._tables: _Tables | None = None
        self._searched = 0
        """Characters searched directly so far (see the class docstring)."""

    def __repr__(self) -> str:
        skipped = f", {self._skipped} too short" if self._skipped else ""
        return f"<Redactor: {self._secret_count} secrets, {len(self._forms)} forms{skipped}>"

    def __bool__(self) -> bool:
        return bool(self._forms)

    def redact(self, text: str) -> str:
        """``text`` with every match replaced by REDACTED; the same object when nothing matched."""
        if len(text) < self._min_length or not self._forms:
            return text
        if self._direct_for(text):
            spans = self._direct(text, first_only=False)
        elif text.isascii():
            # Byte offsets are character offsets: its bytes are one copy, made at once (no seams to
            # scan), and the text itself is sliced.
            spans = self._scan(self._built(), text.encode("ascii"), 0, [])
        else:
            encoded = bytearray()
            spans, surrogates = self._matches(text, encoded, first_only=False)
            return _cut_out(encoded, spans, surrogates) if spans else text
        if not spans:
            return text
        return REDACTED.join([text[start:end] for start, end in _kept(spans, len(text))])

    def contains(self, text: str) -> bool:
        """Whether ``text`` holds any secret or encoded form: what ``redact`` would change."""
        if len(text) < self._min_length or not self._forms:
            return False
        if self._direct_for(text):
            return bool(self._direct(text, first_only=True))
        return bool(self._matches(text, None, first_only=True)[0])

    def _direct_for(self, text: str) -> bool:
        """Whether ``text`` is searched for each form directly (see the class docstring)."""
        if self._tables is not None or len(text) > _DIRECT or self._searched >= 2 * _DIRECT_BUDGET:
            return False
        self._searched += len(text)
        return True

    @property
    def filter_wanted(self) -> bool:
        """Whether the direct searches have cost what building the block filter costs, and it is not built.

        A caller that can pause (the model gate) then builds it through :meth:`filter_steps`;
        texts are still searched directly until it is built, or until twice the budget, when
        the next text builds it at once.
        """
        return self._tables is None and self._searched >= _DIRECT_BUDGET

    def filter_steps(self) -> Iterator[None]:
        """Build the block filter, yielding after every few forms; nothing if it is built already.

        Building takes a few milliseconds per secret: a caller on an event loop lets other work
        run at each step. The filter is used only once complete. Two callers (or threads) may
        both build it; each uses a complete one, and one of them is kept.
        """
        if self._tables is not None:
            return
        tables = _Tables(self._patterns, self._decoders)
        yield from tables.steps()
        self._tables = tables

    def _built(self) -> _Tables:
        """The block filter, built now if no text needed it before."""
        if self._tables is None:
            for _ in self.filter_steps():
                pass
        assert self._tables is not None
        return self._tables

    def _direct(self, text: str, *, first_only: bool) -> list[tuple[int, int]]:
        """The (start, end) of every occurrence of every form in ``text``, each form searched for."""
        found: list[tuple[int, int]] = []
        for form in self._forms:
            at = text.find(form)
            while at >= 0:
                found.append((at, at + len(form)))
                if first_only:
                    return found
                at = text.find(form, at + 1)
        if self._decoders:
            _decoded_in(text, self._decoders, found)
        return found

    def _matches(
        self, text: str, encoded: bytearray | None, *, first_only: bool
    ) -> tuple[list[tuple[int, int]], bool]:
        """The byte (start, end) of every occurrence of every form, in no order, possibly repeated.

        And whether the text holds lone surrogates. The UTF-8 of ``text`` is appended to
        ``encoded`` (unless None) a piece at a time, as it is scanned.
        """
        tables = self._built()
        found: list[tuple[int, int]] = []
        surrogates = False
        seam = tables.max_length - 1
        offset = 0
        previous = b""
        for first in range(0, len(text), tables.chunk):
            piece = text[first : first + tables.chunk]
            try:
                chunk = piece.encode("utf-8")
            except UnicodeEncodeError:
                chunk, surrogates = _utf8(piece), True
            if previous and seam:
                # An occurrence across the edge lies within `seam` bytes of it on either side.
                tail = previous[-seam:]
                self._scan(tables, tail + chunk[:seam], offset - len(tail), found)
            if encoded is not None:
                encoded += chunk
            self._scan(tables, chunk, offset, found)
            if first_only and found:
                break
            offset += len(chunk)
            previous = chunk
        return found, surrogates

    @staticmethod
    def _scan(
        tables: _Tables, data: bytes, offset: int, found: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """Add the span, shifted by ``offset``, of every occurrence of every form in ``data``; return ``found``."""
        for pattern in tables.short:
            at = data.find(pattern)
            while at >= 0:
                found.append((offset + at, offset + at + len(pattern)))
                at = data.find(pattern, at + 1)
        stride = tables.stride
        if not stride:
            return found
        blocks, owners, span = tables.blocks, tables.owners, tables.span
        # Per decoder, the part of `data` where it has looked at every occurrence of its value.
        done: dict[_Decoder, tuple[int, int]] = {}
        step = tables.per_span * stride
        last_start = len(data) - _BLOCK  # the last offset where a whole block fits
        for base in range(0, last_start + 1, step):
            if base + step - stride <= last_start:
                sample = span.unpack_from(data, base)
            else:
                sample = _sampler(stride, (last_start - base) // stride + 1).unpack_from(data, base)
            hits = blocks & sample
            if not hits:
                continue
            # A hit's place in the sample: the first bytes of the sampled blocks (an extended slice,
            # in C) point to the few that can be it. Each first byte of a hit is searched once, so
            # each sampled block is looked at once at most, however many hits a span holds.
            # tuple.index and `in` compare one object at a time (~5 times dearer).
            firsts = data[base : base + len(sample) * stride : stride]
            for first in {block & 0xFF for block in hits}:
                at = firsts.find(first)
                while at >= 0:
                    block = sample[at]
                    if block in hits:
                        position = base + at * stride
                        undecided: list[_Decoder] | None = None
                        for pattern, shift, decoder in owners[block]:
                            start = position - shift
                            if start >= 0 and data.startswith(pattern, start):
                                end = start + len(pattern)
                                if decoder is not None:
                                    if decoder.whole:
                                        # Its run goes whole, once.
                                        looked = done.get(decoder)
                                        if looked is not None and looked[0] <= start < looked[1]:
                                            continue
                                        start, end = decoder.run_at(data, start, end)
                                    done[decoder] = (start, end)
                                found.append((offset + start, offset + end))
                            elif decoder is not None and not decoder.whole:
                                if pattern[0] == 0xFF and shift and data[position - 1] != pattern[1]:
                                    continue  # the block is not the end of a break (see _NEVER)
                                if undecided is None:
                                    undecided = [decoder]
                                else:
                                    undecided.append(decoder)
                            elif pattern is _ANY_BASE64:
                                undecided = tables.look(data, position, done, undecided)
                        if undecided is not None:
                            for decoder in undecided:
                                looked = done.get(decoder)
                                if looked is not None and looked[0] <= position < looked[1]:
                                    continue
                                start, end, decoded = decoder.find(data, position)
                                done[decoder] = (start, end)
                                if decoded is not None:
                                    found.append((offset + decoded[0], offset + decoded[1]))
                    at = firsts.find(first, at + 1)
        return found


Redactor.EMPTY = Redactor(())
