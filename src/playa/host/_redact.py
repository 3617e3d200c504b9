"""Removes a chat's header values, and every encoded form of them, from text bound for the model.

A :class:`Redactor` is built once per change of a chat's secrets and then applied to every tool
result, error and command reply of that chat, so its construction may be slow and its scan must
be fast. What it removes, for each header value of at least :data:`MIN_SECRET_LENGTH` characters:

- the value as given, and the credential after an auth scheme (``Bearer x`` → ``x`` as well);
- each of those percent-encoded, JSON-escaped, and base64 / base64url encoded, including the
  part of a larger base64 blob that encodes the secret at any of the three byte alignments
  (see :func:`encoded_forms`).

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
  forms that own that block at that place are confirmed against the bytes, and a core of
  base64 that a line break may cut is followed to the first break on either side of the block
  (:func:`_wrapped_span`). Forms too short for the stride chosen are looked for with
  ``bytes.find`` over each chunk. The stride is chosen per Redactor to minimise the expected
  cost of both;
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
# Characters of a wrappable core's ends that _wrapped_in searches for: a core is at least 21.
_ANCHOR: Final = 8
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
    for pad in range(3):
        # Inside a larger blob the secret starts at byte offset 0, 1 or 2 of a 3-byte group.
        # Encode it behind `pad` stand-in bytes and keep only the characters whose 6 bits all
        # come from the secret: the leading ones mix in the neighbour's bits, and those past
        # the secret's last whole 6 bits depend on whatever byte follows it.
        encoded = base64.b64encode(bytes(pad) + secret).decode("ascii")
        start = -(-8 * pad // 6)
        stop = 8 * (pad + len(secret)) // 6
        forms.add(encoded[start:stop])
    return forms | {form.translate(_URLSAFE) for form in forms}


_URLSAFE: Final = str.maketrans("+/", "-_")


_PERCENT_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def _lower_escapes(text: str) -> str:
    return _PERCENT_ESCAPE.sub(lambda m: m.group().lower(), text)


_MIN_WRAPPED: Final = 16
_MAX_WRAPPED: Final = 57  # bytes whose base64 fills one 76-column MIME line
_NEWLINES: Final = ("\n", "\r\n")


def _wrappable_cores(secret: bytes) -> set[str]:
    """The standard base64 of ``secret``, whole and at each alignment, that a line wrap may cut.

    A wrapped blob (76 columns for MIME, 64 for PEM) puts a break wherever the column count
    falls, so the secret's base64 can be cut in two anywhere. One break is covered, for
    secrets of :data:`_MIN_WRAPPED` to :data:`_MAX_WRAPPED` bytes: a longer one (a JWT) spans
    two breaks anyway, and a shorter one's base64 is too short for the sampled scan to find
    wrapped at no cost to everything else.
    """
    if not _MIN_WRAPPED <= len(secret) <= _MAX_WRAPPED:
        return set()
    cores = {base64.b64encode(secret).decode("ascii")}
    for pad in range(3):
        encoded = base64.b64encode(bytes(pad) + secret).decode("ascii")
        cores.add(encoded[-(-8 * pad // 6) : 8 * (pad + len(secret)) // 6])
    return cores


def _wrapped(core: str, cut: int, newline: str) -> str:
    return core[:cut] + newline + core[cut:]


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
    """The forms of ``secret`` but the wrapped ones; kept for the latest secrets, as a chat's
    redactor and the log gate both learn its credentials when it opens."""
    if len(secret) < MIN_SECRET_LENGTH:
        return frozenset()
    forms = _forms_of(secret)
    credential = auth_credential(secret)
    if credential is not None and len(credential) >= MIN_SECRET_LENGTH:
        forms |= _forms_of(credential)
    return frozenset(form for form in forms if len(form) >= MIN_SECRET_LENGTH)


def _cores(secret: str) -> set[str]:
    """The base64 cores of ``secret`` (and of its credential) that a line wrap may cut."""
    if len(secret) < MIN_SECRET_LENGTH:
        return set()
    cores = _wrappable_cores(_utf8(secret))
    credential = auth_credential(secret)
    if credential is not None and len(credential) >= MIN_SECRET_LENGTH:
        cores |= _wrappable_cores(_utf8(credential))
    return cores


def encoded_forms(secret: str) -> set[str]:
    """Every string whose presence in a text would leak ``secret``: what a Redactor removes.

    The secret itself, the credential after its auth scheme if it has one, and for each of
    those: percent-encoding (``quote`` with ``safe=''`` and the default ``safe='/'``,
    ``quote_plus``, every byte escaped, and each of them with lower-case escapes), JSON string
    escaping (``ensure_ascii`` on and off, and with ``/`` escaped), standard and URL-safe
    base64 of its UTF-8 bytes with and without padding, the stable core of its base64 at each
    of the three byte alignments inside a larger blob, and (for secrets of 16 to 57 bytes)
    each standard-base64 core cut by one line break anywhere, as MIME and PEM wrap. Forms
    shorter than :data:`MIN_SECRET_LENGTH` are left out; a secret shorter than that has no
    forms at all.
    """
    return set(_plain_forms(secret)) | {
        _wrapped(core, cut, newline)
        for core in _cores(secret)
        for cut in range(1, len(core))
        for newline in _NEWLINES
    }


_REDACTED_BYTES: Final = REDACTED.encode()
_FILLER: Final = b"\xff"  # never in UTF-8: what is left of a match after REDACTED (see _cut_out)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _choose_stride(lengths: list[int], shortest_core: int | None = None) -> int:
    """The sampling stride (0 for no block filter) of least expected cost per byte of text.

    With wrappable cores, the stride leaves each of them long enough to hold a sampled block
    wherever it occurs.
    """
    best_stride, best_cost = 0, _NS_PER_FIND_BYTE * len(lengths)
    top = min(_MAX_STRIDE, max(lengths, default=0) - _BLOCK + 1)
    if shortest_core is not None:
        top = min(top, shortest_core - _BLOCK + 1)
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


class _Core:
    """A wrappable core's bytes, split at every cut: what a break-cut occurrence is checked against."""

    __slots__ = ("heads", "length", "tails")

    def __init__(self, core: bytes) -> None:
        self.length = len(core)
        self.heads = tuple(core[:cut] for cut in range(len(core)))
        self.tails = tuple(core[cut:] for cut in range(len(core)))


_Owner = tuple[bytes, int, _Core | None]
"""A form that holds a block, the block's offset in it, and the form's pieces if a break may cut it."""


def _wrapped_span(data: bytes, core: _Core, start: int, position: int) -> tuple[int, int] | None:
    """Where ``core`` cut by one line break (LF or CRLF) lies, given one of its blocks at ``position``.

    ``start`` is where the core would start if the break came after that block. A break before
    it puts the core's start earlier by the break's length. The block holds no break, so the
    first break found on either side of it is the only one that can cut this occurrence.
    """
    stop = start + core.length + 1  # a cut before the core's last byte, after a CRLF
    newline = data.find(b"\n", max(start, 1), stop)
    if newline < 0:
        return None
    if newline < position:
        cut_at = newline - (data[newline - 1] == 0x0D)
        begin = start - (newline + 1 - cut_at)
        cut = cut_at - begin
        if (
            cut > 0
            and begin >= 0
            and data.startswith(core.heads[cut], begin)
            and data.startswith(core.tails[cut], newline + 1)
        ):
            return begin, newline + 1 + core.length - cut
        newline = data.find(b"\n", position + _BLOCK, stop)
        if newline < 0:
            return None
    cut_at = newline - (data[newline - 1] == 0x0D)
    cut = cut_at - start
    if (
        cut < core.length
        and data.startswith(core.heads[cut], start)
        and data.startswith(core.tails[cut], newline + 1)
    ):
        return start, newline + 1 + core.length - cut
    return None


@functools.lru_cache(maxsize=256)
def _sampler(stride: int, count: int) -> struct.Struct:
    """Reads ``count`` blocks of 4 bytes, ``stride`` bytes apart."""
    gap = f"{stride - _BLOCK}x" if stride > _BLOCK else ""
    return struct.Struct("<" + ("I" + gap) * (count - 1) + "I")


def _block(data: bytes, at: int = 0) -> int:
    """The block of ``data`` at ``at`` as the sampler reads it."""
    return int.from_bytes(data[at : at + _BLOCK], "little")


class _Tables:
    """The sampled block filter over a Redactor's forms (see the module docstring).

    Built for the first text too long to search for each form directly, or by a caller that
    steps through :meth:`steps`; used only once complete, never changed after.
    """

    __slots__ = (
        "_cores",
        "_patterns",
        "blocks",
        "chunk",
        "max_length",
        "owners",
        "per_span",
        "short",
        "span",
        "stride",
    )

    def __init__(self, patterns: tuple[bytes, ...], cores: tuple[str, ...]) -> None:
        """Choose the stride; the table of blocks is filled by :meth:`steps`."""
        lengths = [len(pattern) for pattern in patterns]
        # A wrapped core is one or two bytes longer than the core.
        self.max_length = max([*lengths, *(len(core) + 2 for core in cores)], default=0)
        # Every wrappable core must be found by the sampled scan (see _wrapped_span).
        self.stride = _choose_stride(lengths, min((len(core) for core in cores), default=None))
        self.short: tuple[bytes, ...] = tuple(
            pattern for pattern in patterns if not self.stride or len(pattern) < self.stride + _BLOCK - 1
        )
        self._patterns = tuple(pattern for pattern in patterns if pattern not in self.short)
        self._cores = cores if self.stride else ()
        self.owners: dict[int, tuple[_Owner, ...]] = {}
        self.blocks = self.owners.keys()
        # Whole forms fit in a chunk, so an occurrence spans at most two chunks.
        self.chunk = max(_CHUNK, self.max_length)
        self.per_span = max(1, _SPAN // (self.stride or _BLOCK))
        self.span = _sampler(self.stride or _BLOCK, self.per_span)

    def steps(self) -> Iterator[None]:
        """Fill the table of blocks, pausing after every :data:`_STEP_FORMS` forms or wrappable core."""
        owners: dict[int, list[_Owner]] = {}
        wrappable = {core: _Core(core) for core in map(_utf8, self._cores)}
        for number, pattern in enumerate(self._patterns, 1):
            # The sampled block can start at any of the first `stride` offsets of an occurrence.
            pieces = wrappable.get(pattern)
            for offset in range(self.stride):
                owners.setdefault(_block(pattern, offset), []).append((pattern, offset, pieces))
            if number % _STEP_FORMS == 0:
                yield
        # A core cut by a line break. When the first sampled block of the occurrence lies wholly
        # before or after the break, it is one of the core's own blocks: a failed confirm of the
        # core then looks for the break after, or just before, where the core would start
        # (_wrapped_span). Only a block that holds the break itself is new: the few wrapped forms
        # whose break falls within the first `stride + 3` bytes are patterns owned by those
        # blocks alone, so the core's blocks keep their short lists of owners. Measured and
        # dropped (docs/benchmarks.md, section 5): a second pass that unwraps the base64 runs
        # holding a break (finding them costs more than these blocks), and owning every block of
        # a core so that fewer blocks must hold the break (fewer blocks, more hits, no gain).
        for core in self._cores:
            for cut in range(1, min(self.stride + _BLOCK, len(core))):
                for newline in _NEWLINES:
                    pattern = _utf8(_wrapped(core, cut, newline))
                    for offset in range(max(0, cut - _BLOCK + 1), min(self.stride, cut + len(newline))):
                        owners.setdefault(_block(pattern, offset), []).append((pattern, offset, None))
            yield
        self.owners = {block: tuple(pairs) for block, pairs in owners.items()}
        # A dict's keys view: its intersection with a sample probes the dict, which spreads keys
        # that share their low bits (see the module docstring).
        self.blocks = self.owners.keys()


def _wrapped_in(text: str, core: str, found: list[tuple[int, int]]) -> None:
    """Add the span of every occurrence of ``core`` cut by one line break (LF or CRLF) in ``text``.

    A core is longer than twice :data:`_ANCHOR`, so wherever the break falls, the core's first
    or its last ``_ANCHOR`` characters lie whole on one side of it: each occurrence of either is
    followed to the one line break that can cut the core there (a core holds none).
    """
    length = len(core)
    head, tail = core[:_ANCHOR], core[-_ANCHOR:]
    # The break after the core's first _ANCHOR characters: the core starts at the head.
    start = text.find(head)
    while start >= 0:
        newline = text.find("\n", start + _ANCHOR, start + length + 1)
        if newline >= 0:
            cut = newline - start - (text[newline - 1] == "\r")
            if (
                cut < length
                and text.startswith(core[:cut], start)
                and text.startswith(core[cut:], newline + 1)
            ):
                found.append((start, newline + 1 + length - cut))
        start = text.find(head, start + 1)
    # The break within the core's first _ANCHOR characters: the core ends with the tail.
    at = text.find(tail)
    while at >= 0:
        end = at + _ANCHOR
        newline = text.rfind("\n", max(0, end - length - 2), at)
        if newline >= 0:
            cut = length - (end - newline - 1)
            start = newline - cut - (text[newline - 1] == "\r")
            if (
                0 < cut < _ANCHOR
                and start >= 0
                and text.startswith(core[:cut], start)
                and text.startswith(core[cut:], newline + 1)
            ):
                found.append((start, end))
        at = text.find(tail, at + 1)


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
        "_cores",
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
        cores: set[str] = set()
        for value in kept:
            forms |= _plain_forms(value)
            cores |= _cores(value)
        # Sorted so that two redactors over the same secrets behave identically.
        self._forms: tuple[str, ...] = tuple(sorted(forms))
        self._cores: tuple[str, ...] = tuple(sorted(cores))
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
        tables = _Tables(self._patterns, self._cores)
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
        if "\n" in text:
            for core in self._cores:
                _wrapped_in(text, core, found)
                if first_only and found:
                    break
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
                        for pattern, shift, core in owners[block]:
                            start = position - shift
                            if start < 0:
                                continue
                            if data.startswith(pattern, start):
                                found.append((offset + start, offset + start + len(pattern)))
                            elif core is not None and (wrapped := _wrapped_span(data, core, start, position)):
                                found.append((offset + wrapped[0], offset + wrapped[1]))
                    at = firsts.find(first, at + 1)
        return found


Redactor.EMPTY = Redactor(())
