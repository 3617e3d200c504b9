"""The sampled block filter: where in a long text a Redactor's forms, and runs to decode, may be.

How it finds them (see ``_redact`` for why a filter, and ``_decode`` for the decoding):

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
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from typing import Final

from ._decode import (
    _BACKSLASH,
    _BASE64_RUN,
    _BREAKS,
    _MIN_DECODED,
    _NEWLINES,
    _TO_STANDARD,
    _Decoder,
    _escaped_slashes,
    _run_end,
    _unescaped,
)

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
# Forms whose blocks are entered into the filter between two pauses of Redactor.filter_steps
# (~0.2-0.5 ms).
_STEP_FORMS: Final = 8


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


def scan(tables: _Tables, data: bytes, offset: int, found: list[tuple[int, int]]) -> list[tuple[int, int]]:
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
