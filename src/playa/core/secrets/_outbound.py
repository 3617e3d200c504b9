"""The outbound gate for logs: every log record of every library, redacted before any handler.

A filter on a logger sees only that logger's own records, and a filter on a handler only that
handler's, so both miss something: a library's logger created later, a handler added by a test
harness or a server framework, the traceback that ``exc_info`` carries (formatted by the
handler, after every filter ran). The gate is instead the process's log-record factory: every
record is made by it, so it redacts the message (args applied), the formatted exception and the
stack before any filter or handler can see the record.

What it removes: every credential the process holds (:func:`outbound_secrets`: every open
chat's credentials, the bot token, the encryption secret, the providers' keys — whoever learns
one adds or holds it), as every piece of :data:`PIECE` characters of it or of any of its encoded
forms (the redactor's, :func:`~playa.host.encoded_forms`): libraries shorten what they log
(pydantic's errors show ``'{not json, Bearer sk-ab...f026202'``), and a shortened credential is
a leak too. Records of the loggers that dump raw chat traffic (python-telegram-bot's requests
and updates) also lose every credential-shaped word: a key a user just sent is in them before
anything has recognised it as a key.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import traceback
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, Final

from ._credentials import looks_like_credential
from ._forms import MIN_SECRET_LENGTH, REDACTED, lower_escapes
from ._held import forget, forms_of, keep
from ._redact import _kept

__all__ = ["OutboundSecrets", "install_outbound_gate", "outbound_secrets"]

_RAW_TRAFFIC: Final = ("telegram",)
"""Loggers (and their children) whose records may quote a chat message before it is classified."""
_WORD: Final = re.compile(r"[A-Za-z0-9_\-.~+/=:]{8,}")
PIECE: Final = 12
"""Characters of a credential that a log line may not show, wherever they were cut from."""


def _count(counts: dict[str, int], keys: Iterable[str], step: int) -> None:
    """Add ``step`` to each key's count; a count that reaches zero goes."""
    for key in keys:
        if count := counts.get(key, 0) + step:
            counts[key] = count
        else:
            del counts[key]


def _maximal(parts: Iterable[str]) -> list[str]:
    """The distinct ``parts`` that no other part contains: a contained part's windows are the
    container's. A secret's forms repeat each other (its base64 cores lie inside its base64,
    ``Bearer x`` holds ``x``), so this halves the windows a new secret makes."""
    kept: list[str] = []
    joined = ""
    for part in sorted(set(parts), key=len, reverse=True):
        # Parts hold no whitespace, so a part found in the joined text lies inside one kept part.
        if part not in joined:
            kept.append(part)
            joined = " ".join(kept)
    return kept


class _Pieces:
    """Every :data:`PIECE`-character window of every form of the values held, and the forms
    shorter than a window; ``redact`` replaces each run of matching windows with REDACTED.

    Adding or dropping a value costs its own windows (a few hundred), never a rebuild over every
    value the process knows: a bot meets a new chat's keys all its life, and each must be covered
    at once. Logs are short and few next to tool results, so the windows are probed at every
    position of each run of characters they are made of. Percent-escapes are kept and probed in
    lower case (``lower_escapes``): a secret's escaped forms are one set of windows, whatever case a
    library or a server escapes in. Whitespace never joins a window
    (``Bearer x`` is covered through ``x``), and a form cut by a line break (wrapped base64) is
    covered line by line: every line of it long enough to hold a window is made of the whole
    form's windows.
    """

    __slots__ = ("_alphabet", "_extra", "_of", "_runs", "_short", "_short_counts", "_windows")

    def __init__(self) -> None:
        self._windows: set[str] = set()
        """Every window of every value held."""
        self._extra: Counter[str] = Counter()
        """The windows two or more values held have, each with how many holders it has beyond
        the first: dropping one value keeps them.

        Rare (random keys share no 12 characters; JWTs share their header), so adding and
        dropping a value are set operations over its windows, in C; shared windows are counted
        by ``Counter.update``, in C too, and uncounted one by one.
        """
        self._short_counts: dict[str, int] = {}
        self._of: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        """Each value's windows and short forms, so that dropping it costs no encoding."""
        # The rest is replaced, never changed in place: another thread's log call may be reading.
        self._short: tuple[str, ...] = ()
        self._alphabet: frozenset[str] = frozenset()
        self._runs: re.Pattern[str] | None = None

    def __bool__(self) -> bool:
        return bool(self._windows or self._short)

    def add(self, value: str) -> None:
        if value in self._of:
            return
        keep(value)  # for the chat's redactor too, until ``remove``
        parts: list[str] = []
        short: set[str] = set()
        for form in forms_of(value):
            for part in lower_escapes(form).split():
                if len(part) >= PIECE:
                    parts.append(part)
                elif len(part) >= MIN_SECRET_LENGTH:
                    short.add(part)
        parts = _maximal(parts)
        windows = {part[i : i + PIECE] for part in parts for i in range(len(part) - PIECE + 1)}
        self._of[value] = (tuple(windows), tuple(short))
        if common := windows & self._windows:
            self._extra.update(common)
        self._windows |= windows
        if short:
            _count(self._short_counts, short, 1)
            self._short = tuple(sorted(self._short_counts))
        alphabet = self._alphabet.union(*parts)
        if alphabet != self._alphabet:
            self._alphabet = alphabet
            self._runs = re.compile(f"[{re.escape(''.join(sorted(alphabet)))}]{{{PIECE},}}")

    def remove(self, value: str) -> None:
        """Undo ``add(value)``; what other values held share stays."""
        if value not in self._of:
            return
        windows, short = self._of.pop(value)
        forget(value)
        extra = self._extra
        if extra and not extra.keys().isdisjoint(windows):
            gone: list[str] = []
            for window in windows:
                count = extra.get(window)
                if count is None:
                    gone.append(window)
                elif count > 1:
                    extra[window] = count - 1
                else:
                    del extra[window]
            self._windows.difference_update(gone)
        else:
            self._windows.difference_update(windows)
        if short:
            _count(self._short_counts, short, -1)
            self._short = tuple(sorted(self._short_counts))

    def remove_all(self, values: Collection[str]) -> None:
        """Undo ``add`` of each of ``values``.

        One by one while they are fewer than the values that stay; otherwise the tables are
        made anew from those that stay. Each removal is a few hundred lookups at random places
        of a table that outgrows every cache (~0.6 µs each with 2,000 values held), so letting
        go of most values at once (a host shutting down) costs less as a rebuild.
        """
        values = [value for value in dict.fromkeys(values) if value in self._of]
        if len(values) * 2 <= len(self._of):
            for value in values:
                self.remove(value)
            return
        for value in values:
            del self._of[value]
            forget(value)
        windows: Counter[str] = Counter()
        short: Counter[str] = Counter()
        for own, own_short in self._of.values():
            windows.update(own)
            short.update(own_short)
        self._windows = set(windows)
        self._extra = Counter({window: count - 1 for window, count in windows.items() if count > 1})
        self._short_counts = dict(short)
        self._short = tuple(sorted(short))

    def redact(self, text: str) -> str:
        spans: list[tuple[int, int]] = []
        windows, runs = self._windows, self._runs
        probe = lower_escapes(text)  # the same length: a span found in it is the same span of ``text``
        if runs is not None:
            for run in runs.finditer(probe):
                start, part = run.start(), run.group()
                spans += [
                    (start + i, start + i + PIECE)
                    for i in range(len(part) - PIECE + 1)
                    if part[i : i + PIECE] in windows
                ]
        for form in self._short:
            at = probe.find(form)
            while at >= 0:
                spans.append((at, at + len(form)))
                at = probe.find(form, at + 1)
        if not spans:
            return text
        return REDACTED.join([text[start:end] for start, end in _kept(spans, len(text))])


class OutboundSecrets:
    """Every credential the process holds now, for the log gate.

    ``add`` is for the life of the process (the bot token, the providers' keys). ``hold`` is for
    as long as an owner (a chat's servers, a session) may still log them: the owner calls
    ``release`` once it has closed everything that could, so a bot that meets thousands of chats
    keeps only the open ones' keys. A value held by several owners stays until the last lets go.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        """Each value, with how many holders it has (``add`` is one that never lets go)."""
        self._permanent: set[str] = set()
        self._held: dict[object, frozenset[str]] = {}
        self._lock = threading.Lock()
        self.pieces = _Pieces()
        self._together = 0
        """How many ``releasing_together`` blocks are open."""
        self._unheld: list[str] = []
        """Values nobody holds any more, still covered until the last such block ends."""
        self._finalized: deque[object] = deque()
        """Owners whose finalizer ran (``release_later``), let go of by the next call that takes the lock."""

    @contextlib.contextmanager
    def releasing_together(self) -> Iterator[None]:
        """Within, a value its last holder lets go of stays covered until the block ends, and
        all of them go at once then: for many owners letting go together (a host closing its
        chats), which costs one rebuild of the tables rather than a removal per value. Until
        then a log line still loses them, which is never less safe."""
        with self._lock:
            self._let_go_finalized()
            self._together += 1
        try:
            yield
        finally:
            with self._lock:
                self._let_go_finalized()
                self._together -= 1
                if not self._together and self._unheld:
                    # A value held again meanwhile stays.
                    gone = [value for value in self._unheld if value not in self._counts]
                    self._unheld = []
                    self.pieces.remove_all(gone)

    def add(self, values: Iterable[str]) -> None:
        new = {value for value in values if len(value) >= MIN_SECRET_LENGTH} - self._permanent
        if not new:
            return
        with self._lock:
            for value in new - self._permanent:
                self._permanent.add(value)
                self._acquire(value)
            self._let_go_finalized()

    def hold(self, owner: object, values: Iterable[str]) -> None:
        """``owner`` holds exactly ``values`` now (what it held before and no longer does is let go)."""
        kept = frozenset(value for value in values if len(value) >= MIN_SECRET_LENGTH)
        with self._lock:
            before = self._held.get(owner, frozenset())
            if kept != before:
                for value in kept - before:
                    self._acquire(value)
                self._held[owner] = kept
                for value in before - kept:
                    self._release(value)
            # Last: a value a finalized owner held and this one holds too stays covered throughout.
            self._let_go_finalized()

    def release(self, owner: object) -> None:
        """``owner`` can log nothing of its values any more."""
        with self._lock:
            self._let_go_finalized()
            for value in self._held.pop(owner, frozenset()):
                self._release(value)

    def release_later(self, owner: object) -> None:
        """``release``, for a finalizer (``weakref.finalize``): it takes no lock.

        The collector runs finalizers inside whatever allocation starts a collection, also one
        made while this registry's lock is held by the same thread (a new secret's windows are
        thousands of allocations), where ``release`` would wait for that lock for ever and stop
        the thread, event loop and all. This only queues ``owner``; the next call that takes the
        lock, this thread's or another's, lets go of its values. Until then they stay covered,
        which is never less safe.
        """
        self._finalized.append(owner)

    def _let_go_finalized(self) -> None:
        """Let go of what finalized owners held (called with the lock held, after any acquiring:
        another thread's log record reads the windows without the lock)."""
        while self._finalized:
            for value in self._held.pop(self._finalized.popleft(), frozenset()):
                self._release(value)

    def _acquire(self, value: str) -> None:
        count = self._counts.get(value, 0)
        self._counts[value] = count + 1
        if not count:
            self.pieces.add(value)

    def _release(self, value: str) -> None:
        count = self._counts.pop(value, 0)
        if count > 1:
            self._counts[value] = count - 1
        elif count and self._together:
            self._unheld.append(value)
        elif count:
            self.pieces.remove(value)

    def __contains__(self, value: object) -> bool:
        """Whether ``value`` is covered now (what finalized owners held is let go of first)."""
        with self._lock:
            self._let_go_finalized()
            return value in self._counts

    def __repr__(self) -> str:
        return f"<OutboundSecrets: {len(self._counts)} values>"


_SECRETS = OutboundSecrets()


def outbound_secrets() -> OutboundSecrets:
    """The process's credentials registry, read by the log gate."""
    return _SECRETS


def _mask_shaped(text: str) -> str:
    return _WORD.sub(lambda m: REDACTED if looks_like_credential(m.group()) else m.group(), text)


def _raw_traffic(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in _RAW_TRAFFIC)


def redact_record(record: logging.LogRecord, redactor: _Pieces) -> None:
    """Redact one record in place: its message, its exception and its stack."""
    shaped = _raw_traffic(record.name)
    if not redactor and not shaped:
        return
    try:
        message = record.getMessage()
    except Exception:  # boundary: a malformed log call must not take the logger down
        message = f"{record.msg!s} [arguments could not be formatted]"
    clean = redactor.redact(message)
    if shaped:
        clean = _mask_shaped(clean)
    if clean != message or record.args:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[1] is not None:
        text = "".join(traceback.format_exception(record.exc_info[1])).rstrip("\n")
        clean = redactor.redact(text)
        if shaped:
            clean = _mask_shaped(clean)
        if clean != text:
            # The handler would format exc_info again, credential and all: keep the text only.
            record.exc_text, record.exc_info = clean, None
    elif record.exc_text:
        record.exc_text = redactor.redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redactor.redact(record.stack_info)


_installed: Callable[..., logging.LogRecord] | None = None


def install_outbound_gate() -> None:
    """Make every log record of the process pass the gate (idempotent)."""
    global _installed
    if _installed is not None and logging.getLogRecordFactory() is _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        redact_record(record, _SECRETS.pieces)
        return record

    _installed = factory
    logging.setLogRecordFactory(factory)
