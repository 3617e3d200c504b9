"""The flow guard's record of a turn: what each server (or workspace file) gave the model, and
whether a call's arguments carry some of it to another server.

A prompt injection in one server's result can tell the agent to pass that result, or a file it
read, to another server's tool (the "lethal trifecta": private data, untrusted text, a way out).
Within a turn Playa knows every result the model saw, so it can see such a flow in a call's
arguments: a run of ``RUN`` letters and digits (spacing, punctuation, case and JSON escaping
aside), a URL, an email address or a key-shaped word (``looks_like_credential``) of a source
that is not the target server.

It must cost next to nothing on every call, whatever the turn read before. At record time a
source is normalized once and its ``GRAM``-character grams are indexed at every ``SOURCE_STEP``-th
position; its URLs, emails and key-shaped words are taken with one regex each. A check looks up
the grams of the arguments at every ``CHECK_STEP``-th position: steps that are coprime with
``GRAM + SOURCE_STEP * CHECK_STEP - 1 <= RUN`` meet on every common run of ``RUN`` characters
(the Chinese remainder theorem puts one indexed position of the source and one looked-up
position of the arguments at the same offset of the run), so the check costs the length of the
arguments, not of the sources. A gram found is checked by extending it both ways to a run of at
least ``RUN``; a short common phrase is no flow.

After a call's network work the index is out of the CPU's caches, so what a check costs is
mostly its trips to memory: one per gram looked up (a set, whose probes are neighbours). So
the source is indexed at every position and the arguments looked up at every tenth: about
12 MB for 100 kB of results, held until the turn ends and bounded by ``TURN_MAX``
(``bench/bench_flow.py``: some 40 µs in place, where every second position cost 63).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..core import ChatSession, looks_like_credential
from ._settings import FlowGuardMode
from .store import AuditLog, shown_name

__all__ = [
    "CHECK_STEP",
    "GRAM",
    "RECORD_MAX",
    "RUN",
    "SOURCE_STEP",
    "TURN_MAX",
    "Flow",
    "FlowGuard",
    "FlowKind",
    "FlowSource",
    "TurnFlows",
]

logger = logging.getLogger(__name__)

RUN: Final = 24
"""Letters and digits (with single separators between words) of a source that make a flow."""
GRAM: Final = 15
SOURCE_STEP: Final = 1
CHECK_STEP: Final = 10
assert GRAM + SOURCE_STEP * CHECK_STEP - 1 <= RUN  # every common run of RUN holds a met gram

FlowKind = Literal["text", "url", "email", "key"]

_SHOWN: Final = 48
_MAX_FLOWS: Final = 8
_FEW: Final = 32
RECORD_MAX: Final = 200_000
"""Characters of one result recorded: the model-bound gate cuts a result there (its default),
and what the model never saw it cannot copy."""
TURN_MAX: Final = 250_000
"""Characters of a turn's results whose runs are indexed (about 28 MB of index, held while the
turn runs; many chats' turns run at once, so the bound is the memory one turn may hold): a turn that
reads more has its later text checked for URLs, emails and keys only, and says so in the log."""
_MAX_TRIES: Final = 32
"""Occurrences of one gram looked at in a source: a source that repeats a phrase thousands of
times must not make every check slow (a flow through such a phrase is still found by the other
grams of its run)."""

# JSON's escapes (a result is often JSON text; the model writes the decoded string, or the other
# way round), and URL encoding's: each is a separator, as the character it stands for is.
_UNICODE_ESCAPE: Final = re.compile(r"\\u([0-9a-fA-F]{4})")
_ESCAPE: Final = re.compile(r"\\+[nrtbf\"/\\]|%[0-9a-fA-F]{2}")
_SEPARATORS: Final = re.compile(r"[\W_]+")
_URL: Final = re.compile(r"https?://[^\s\"'<>\\`{}|^\[\]]+", re.IGNORECASE)
_EMAIL: Final = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
# A word of 11 characters or more (the shortest key: a known prefix and 8 more), without the
# full stop that may end its sentence.
_WORD: Final = re.compile(
    r"(?<![A-Za-z0-9_\-~+/=.])(?=[A-Za-z0-9_\-~+/=.]{11})[A-Za-z0-9_\-~+/=]+(?:\.[A-Za-z0-9_\-~+/=]+)*"
)
# ASCII text is normalized with C string methods alone; a regex sub per separator costs 4 times more.
_ASCII_SEPARATORS: Final = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum()})
_URL_END: Final = ".,;:!?)'\""


def normalized(text: str) -> str:
    """``text`` as runs are compared: JSON and URL escapes decoded as separators, case folded,
    every run of characters other than letters and digits one space."""
    if "\\" in text:
        text = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    if "\\" in text or "%" in text:
        text = _ESCAPE.sub(" ", text)
    if text.isascii():
        return " ".join(text.lower().translate(_ASCII_SEPARATORS).split())
    return _SEPARATORS.sub(" ", text.casefold()).strip()


def _urls(text: str) -> set[str]:
    if "\\/" in text:
        text = text.replace("\\/", "/")
    return {url.rstrip(_URL_END) for url in _URL.findall(text)}


def _emails(text: str) -> set[str]:
    return {email.casefold().rstrip(".") for email in _EMAIL.findall(text)} if "@" in text else set()


@dataclass(frozen=True, slots=True)
class FlowSource:
    """Where text of a turn came from: a server's result, or a workspace file the agent read."""

    server: str | None
    """The server's name; None for the chat's workspace."""
    label: str
    """How the owner is told: the server's name, or ``workspace file <path>``."""

    @classmethod
    def of_server(cls, name: str) -> FlowSource:
        return cls(name, name)

    @classmethod
    def of_file(cls, path: str) -> FlowSource:
        # The model names the path: on one line, it cannot pass for the question's own lines.
        return cls(None, f"workspace file {shown_name(path, str)}")

    @property
    def origin(self) -> str:
        """What a log line and the audit log name: the server, or ``workspace`` (never a path)."""
        return self.server if self.server is not None else "workspace"


@dataclass(frozen=True, slots=True)
class Flow:
    """Something of ``source`` found in a call's arguments."""

    source: FlowSource
    kind: FlowKind
    shown: str
    """What was found, fit to show the owner: cut, and a key never shown at all."""

    def describe(self) -> str:
        """One line for the owner: what came from where."""
        return f"{self.kind} from {self.source.label}: {self.shown}"


@dataclass(slots=True)
class _Source:
    source: FlowSource
    text: str
    """Normalized."""


@dataclass(slots=True)
class TurnFlows:
    """What the model saw in one turn, by source, indexed for ``check``; ``clear`` ends the turn."""

    _sources: list[_Source] = field(default_factory=list)
    _grams: dict[str, int] = field(default_factory=dict)
    """Each indexed gram, and the sources that index it (bit ``n`` for the ``n``-th)."""
    _known: set[str] = field(default_factory=set)
    """The same grams, for the check's first look: a set finds that a gram is absent in one
    memory access, a dict in two or more."""
    _urls: dict[str, set[int]] = field(default_factory=dict)
    _emails: dict[str, set[int]] = field(default_factory=dict)
    _keys: dict[str, set[int]] = field(default_factory=dict)
    _indexed: int = 0

    def __len__(self) -> int:
        return len(self._sources)

    def __repr__(self) -> str:
        return f"TurnFlows({len(self._sources)} sources, {len(self._grams)} grams)"

    @property
    def full(self) -> bool:
        """Whether the turn read more than ``TURN_MAX``: runs of what came after are not found."""
        return self._indexed >= TURN_MAX

    def clear(self) -> None:
        self._indexed = 0
        self._sources.clear()
        self._grams.clear()
        self._known.clear()
        self._urls.clear()
        self._emails.clear()
        self._keys.clear()

    def record(self, source: FlowSource, text: str) -> None:
        """Remember ``text`` (what the model saw of a result: redacted) as ``source``'s."""
        if not text:
            return
        text = text[:RECORD_MAX]
        number = len(self._sources)
        norm = normalized(text)
        self._sources.append(_Source(source, norm))
        grams, known, bit = self._grams, self._known, 1 << number
        indexed = min(len(norm), TURN_MAX - self._indexed)
        self._indexed += max(0, indexed)
        for start in range(0, indexed - GRAM + 1, SOURCE_STEP):
            gram = norm[start : start + GRAM]
            grams[gram] = grams.get(gram, 0) | bit
            known.add(gram)
        for url in _urls(text):
            self._urls.setdefault(url, set()).add(number)
        for email in _emails(text):
            self._emails.setdefault(email, set()).add(number)
        for word in _WORD.findall(text):
            if looks_like_credential(word):
                self._keys.setdefault(word, set()).add(number)

    def check(self, target: str, arguments: Mapping[str, Any]) -> list[Flow]:
        """What of another source than server ``target`` the arguments carry (at most a few)."""
        if not self._sources:
            return []
        text = "\n".join(_strings(arguments))
        flows: list[Flow] = []
        # Each kind is looked for only when a source of the turn has one: most have no key.
        kinds: list[tuple[FlowKind, Callable[[str], Iterable[str]], dict[str, set[int]], bool]] = [
            ("url", _urls, self._urls, True),
            ("email", _emails, self._emails, False),  # case folded
            ("key", _WORD.findall, self._keys, True),
        ]
        for kind, find, table, verbatim in kinds:
            if not table:
                continue
            # A few values are looked for as they are (a substring search each, in C); many, by
            # taking the arguments' own and looking them up.
            few = verbatim and len(table) <= _FEW
            found = [v for v in table if v in text] if few else table.keys() & find(text)
            for value in found:
                for number in sorted(table[value]):
                    source = self._sources[number].source
                    if source.server != target:
                        shown = (
                            f"a key-shaped word of {len(value)} characters" if kind == "key" else _cut(value)
                        )
                        flows.append(Flow(source, kind, shown))
                        break
        flows.extend(self._runs(target, normalized(text)))
        return flows[:_MAX_FLOWS]

    def _runs(self, target: str, norm: str) -> Iterator[Flow]:
        grams, sources = self._grams, self._sources
        # The target's own results flow back to it freely: their grams are not even verified.
        other = ~sum(1 << n for n, source in enumerate(sources) if source.source.server == target)
        last = len(norm) - GRAM
        if last < 0:
            return
        # The common case, no gram of the arguments indexed, costs a slice per step and a set
        # lookup; only a hit walks the positions again.
        if self._known.isdisjoint([norm[at : at + GRAM] for at in range(0, last + 1, CHECK_STEP)]):
            return
        found = 0
        at = 0
        while at <= last:
            gram = norm[at : at + GRAM]
            mask = grams.get(gram, 0) & other
            if mask:
                hit = self._verify(gram, norm, at, mask)
                if hit is not None:
                    number, start, end = hit
                    yield Flow(sources[number].source, "text", _shown_run(norm[start:end]))
                    found += 1
                    if found >= _MAX_FLOWS:
                        return
                    at = end + (-end % CHECK_STEP)
                    continue
            at += CHECK_STEP

    def _verify(self, gram: str, norm: str, at: int, mask: int) -> tuple[int, int, int] | None:
        """A source of ``mask`` that shares a run of ``RUN`` with ``norm`` around the gram at
        ``at``, and the run's bounds in ``norm``; None when only a short phrase is shared.

        Only the sources that index this gram: a source that holds it elsewhere meets the run
        at another of the arguments' positions."""
        for number, source in enumerate(self._sources):
            if not mask >> number & 1:
                continue
            text = source.text
            position = text.find(gram)
            tries = 0
            while position != -1 and tries < _MAX_TRIES:
                before = _common_suffix(text, position, norm, at)
                after = _common_prefix(text, position + GRAM, norm, at + GRAM)
                if before + GRAM + after >= RUN:
                    return number, at - before, at + GRAM + after
                position = text.find(gram, position + 1)
                tries += 1
        return None


def _common_prefix(a: str, i: int, b: str, j: int) -> int:
    """How many characters ``a[i:]`` and ``b[j:]`` share from their start: slices compared in C,
    galloping then halving, so a run of 100 kB costs some 30 comparisons."""
    size, limit, step = 0, min(len(a) - i, len(b) - j), 8
    while size + step <= limit and a[i + size : i + size + step] == b[j + size : j + size + step]:
        size += step
        step *= 2
    while step > 1:
        step //= 2
        if size + step <= limit and a[i + size : i + size + step] == b[j + size : j + size + step]:
            size += step
    return size


def _common_suffix(a: str, i: int, b: str, j: int) -> int:
    """How many characters ``a[:i]`` and ``b[:j]`` share at their end."""
    size, limit, step = 0, min(i, j), 8
    while size + step <= limit and a[i - size - step : i - size] == b[j - size - step : j - size]:
        size += step
        step *= 2
    while step > 1:
        step //= 2
        if size + step <= limit and a[i - size - step : i - size] == b[j - size - step : j - size]:
            size += step
    return size


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """Every string of a call's arguments, the keys of its objects included."""
    if isinstance(value, str):
        yield value
    elif depth > 32:
        return
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                yield key
            yield from _strings(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, depth + 1)


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _shown_run(run: str) -> str:
    """A run as the owner sees it: its words, a key-shaped one masked, cut."""
    words: list[str] = []
    length = 0
    for word in run.strip().split(" "):
        # Whole words, each masked before any is cut: half a key is no key to the test.
        words.append("[key]" if looks_like_credential(word) else word)
        length += len(word) + 1
        if length > _SHOWN:
            break
    return _cut(" ".join(words))


class FlowGuard:
    """The flow guard of one chat: the running turn's sources, and what a call's flows lead to.

    In every mode but ``off`` a flow is logged (the source, the target and the kind, never the
    text) and recorded in the chat's audit log; under ``ask`` the call is held for the owner,
    unless the owner marked its tool read-only (``/mcp_policy <name> [tool] read-only``).
    ``mode`` is asked at each call: whether the chat is a group is the front end's to say.
    """

    def __init__(
        self,
        session: ChatSession,
        *,
        mode: Callable[[], FlowGuardMode],
        redact: Callable[[str], str],
        audit: AuditLog,
    ) -> None:
        self._session = session
        self._mode = mode
        self._redact = redact
        self._audit = audit
        self.turn = TurnFlows()

    @property
    def mode(self) -> FlowGuardMode:
        return self._mode()

    @property
    def watching(self) -> bool:
        """Whether results are recorded now: in a turn, with the guard on."""
        return self._session.turn_ui is not None and self.mode != "off"

    def saw(self, source: FlowSource, text: str) -> None:
        """The model saw ``text`` from ``source`` in the running turn (none: nothing to guard)."""
        if not self.watching:
            return
        # What the model saw, and so what it can copy: the result with every credential removed.
        full = self.turn.full
        self.turn.record(source, self._redact(text))
        if self.turn.full and not full:
            logger.warning(
                "%s: this turn read more than %d characters of results; the flow guard finds URLs, "
                "emails and keys of what follows, but no longer runs of text",
                self._session.scope,
                TURN_MAX,
            )

    def end_turn(self) -> None:
        self.turn.clear()

    def held(
        self, server: str, tool: str, arguments: Mapping[str, Any], *, read_only: bool = False
    ) -> list[Flow]:
        """The flows of a call of ``tool`` on ``server`` that the owner must allow first ([] when the
        call may go ahead); every flow found is logged and recorded, whatever the mode.

        ``read_only``: the owner marked the tool read-only, so data flowing into it goes nowhere
        else and no flow is held (each is still logged and recorded, marked so).
        """
        if not len(self.turn):
            return []  # the turn has read nothing yet: nothing to carry
        mode = self.mode
        if mode == "off":
            return []
        flows = self.turn.check(server, arguments)
        sender = self._session.turn_sender
        for flow in flows:
            logger.warning(
                "%s: a call of %s on %s carries %s from %s (flow guard: %s%s)",
                self._session.scope,
                tool,
                server,
                flow.kind,
                flow.source.origin,
                mode,
                ", the owner marked the tool read-only" if read_only else "",
            )
            self._audit.record(
                "data_flow",
                sender=sender.id if sender is not None else None,
                server=server,
                tool=tool,
                source=flow.source.origin,
                flow=flow.kind,
                guard=mode,
                read_only=read_only,
            )
        return flows if mode == "ask" and not read_only else []

    def refusal(self, exposed: str, flows: Sequence[Flow]) -> str:
        """What the model learns of a call the guard held and nobody allowed."""
        sources = sorted({flow.source.label for flow in flows})
        return (
            f"{exposed} was not called: its arguments carry data read in this turn from "
            f"{', '.join(sources)}, and the owner must allow data to flow between servers."
        )
