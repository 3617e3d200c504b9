"""The decoding pass: a run of base64 cut by line breaks, or of hex, that holds a secret.

A literal form is found where it occurs; an encoding cut by line breaks (raw or escaped), or
written in hex with separators, is found by decoding the run around a place the scan points at
(``_blocks``), or, in a text searched directly, every run a regular expression finds.

Not covered: base64 lines indented or joined by other whitespace, lines narrower than three
characters, hex cut by line breaks (a dump's lines, raw or escaped) in a text long enough for
the block filter (a text searched directly decodes every run of hex), hex that mixes cases or
separators, and any other transformation (base32, UTF-16, reversal, a value split over several
results). The block filter starts a decoding at a break escaped once or twice and at a ``/``
escaped once: a run whose breaks are escaped more deeply than that may pass it (a text searched
directly is decoded whatever the depth).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Final

from ._forms import _URLSAFE_BYTES, MIN_SECRET_LENGTH, _base64_cores, _utf8, auth_credential

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
        # Each byte's two digits apart (``de:ad:be:ef``), in either case: ``bytes.hex`` puts
        # the separator in, in C, and no separator has a case.
        spaced = [data.hex(separator).encode() for separator in (":", " ", "-")]
        separated = {*spaced, *(form.upper() for form in spaced)}
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


def _decoders(secret: str) -> tuple[_Decoder, ...]:
    """The decoders of ``secret`` (kept while it is held: ``_held.decoders_of``).

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


def _run_end(run: re.Pattern[bytes], data: bytes, start: int, stop: int = sys.maxsize) -> int:
    """Where the run of ``run``'s characters that starts at ``start`` ends (``stop`` at most)."""
    match = run.match(data, start, stop)
    assert match is not None  # the pattern matches the empty run too
    return match.end()


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
