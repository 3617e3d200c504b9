"""Removes a chat's secrets, and every encoded form of them, from text bound for the model.

A :class:`Redactor` is built once per change of a chat's secrets and then applied to every tool
result, error and command reply of that chat, so its construction may be slow and its scan must
be fast. What it removes is listed in :mod:`._forms`.

The forms are :mod:`._forms`'; the decoding of runs that hold a secret cut by line breaks or in
hex is :mod:`._decode`'s; the sampled block filter that finds both in a long text is
:mod:`._blocks`'. Here: the Redactor, which searches a short text for each form directly and a
long one with the filter, and cuts what it found out of the text.

Why the scan is not a regular expression: CPython's ``re`` has no multi-literal (Aho–Corasick)
search. An alternation of a few hundred literals scans at ~5-10 MB/s, and even a search for one
character class manages ~180 MB/s; a ``str.replace`` loop over every form pays one full pass
per form (and a new copy of the text per form that matched). Nor is it a compiled Aho–Corasick
automaton: on the benchmark's 10 MB with 189 forms, ``pyahocorasick`` scans a ``str`` at
~35 MB/s and ``ahocorasick-rs`` at ~75 MB/s (~420 MB/s on bytes with its DFA), where this whole
redaction runs at ~370 MB/s (docs/benchmarks.md). The scan is a sampled block filter
(:mod:`._blocks`), around which the Redactor works as follows:

- the text is encoded as UTF-8 (with surrogates passed through), and so is every form: UTF-8
  is self-synchronising, so a form occurs in the text exactly where its bytes occur in the
  text's bytes, and the redacted bytes decode back to the text. An ASCII text is encoded at
  once (one copy of the same size). Any other is encoded ``_CHUNK`` characters at a time
  and each chunk is scanned at once: for a large non-ASCII text CPython would map a fresh
  worst-case buffer (4 bytes a character) on every call, whose page faults cost as much as the
  encoding, and the scan reads bytes still in the cache. A form across the edge of two chunks
  lies within the seam of ``longest form - 1`` bytes on either side, which is scanned on its
  own (chunks are never shorter than a form);
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

import itertools
from collections.abc import Iterable, Iterator
from typing import ClassVar, Final

from ._blocks import _Tables, scan
from ._decode import _decoded_in, _Decoder
from ._forms import MIN_SECRET_LENGTH, REDACTED, _utf8
from ._held import decoders_of, forms_of
from ._tail import held_from

__all__ = ["Redactor"]

# Characters up to which a text is searched for each form directly, and how many in all before
# the block filter is built (see Redactor). Searching costs 0.2-0.4 ns per character and form
# (more in a text with line breaks), and building ~200 µs per form: the budget is where they meet.
_DIRECT: Final = 4096
_DIRECT_BUDGET: Final = 400_000

_REDACTED_BYTES: Final = REDACTED.encode()
_FILLER: Final = b"\xff"  # never in UTF-8: what is left of a match after REDACTED (see _cut_out)


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
            forms |= forms_of(value)
            decoders.update(dict.fromkeys(decoders_of(value)))
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
            spans = scan(self._built(), text.encode("ascii"), 0, [])
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

    def contains_bytes(self, data: bytes) -> bool:
        """Whether ``data`` (an image, a file) holds any secret or encoded form.

        Bytes cannot be redacted in place: what holds a secret is withheld whole. Latin-1 maps
        every byte to one character, so every ASCII form is found where its bytes are; UTF-8
        finds the forms of non-ASCII secrets.
        """
        if not self._forms:
            return False
        return self.contains(data.decode("latin-1")) or self.contains(data.decode("utf-8", "ignore"))

    def held_from(self, text: str) -> int:
        """Where ``text``, still being written, could end in the head of a secret (see :mod:`._tail`).

        A streamed text is shown redacted up to there; ``len(text)`` when nothing is held.
        """
        if not self._forms:
            return len(text)
        return held_from(
            text,
            self._forms,
            runs=bool(self._decoders),
            matches=lambda window: self._direct(window, first_only=False),
        )

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
                scan(tables, tail + chunk[:seam], offset - len(tail), found)
            if encoded is not None:
                encoded += chunk
            scan(tables, chunk, offset, found)
            if first_only and found:
                break
            offset += len(chunk)
            previous = chunk
        return found, surrogates


Redactor.EMPTY = Redactor(())
