"""What is derived from each secret the process holds (its literal forms, its decoders), kept
only while it is held.

A chat's redactor and the log gate both learn a chat's credentials when it opens, and the
redactor again at each change of them, so each value's forms are worth computing once. They are
kept for exactly as long as an :class:`~._outbound.OutboundSecrets` counts the value, and go when
its last holder lets go: a cache keyed by the value itself (an ``lru_cache``) would keep a closed
chat's credentials, and every encoding of them, in memory for the life of the process. A value
nobody holds (a test's, a one-off redactor's) is derived anew each time and kept nowhere.
"""

from __future__ import annotations

import threading

from ._decode import _Decoder, _decoders
from ._forms import _plain_forms

__all__ = ["decoders_of", "forget", "forms_of", "keep"]


class _Derived:
    __slots__ = ("decoders", "forms", "holders")

    def __init__(self) -> None:
        self.holders = 1
        self.forms: frozenset[str] | None = None
        self.decoders: tuple[_Decoder, ...] | None = None


_HELD: dict[str, _Derived] = {}
_lock = threading.Lock()


def keep(value: str) -> None:
    """A registry holds ``value`` from now on: what is derived from it is kept until ``forget``."""
    with _lock:
        derived = _HELD.get(value)
        if derived is None:
            _HELD[value] = _Derived()
        else:
            derived.holders += 1


def forget(value: str) -> None:
    """Undo one ``keep(value)``; the last one drops all that was derived from it."""
    with _lock:
        derived = _HELD.get(value)
        if derived is not None:
            derived.holders -= 1
            if not derived.holders:
                del _HELD[value]


def forms_of(value: str) -> frozenset[str]:
    """``value``'s literal forms (``_forms``), kept while it is held."""
    derived = _HELD.get(value)
    if derived is None:
        return _plain_forms(value)
    if derived.forms is None:
        # Two threads may both compute it: the same result, and cheaper than a lock held meanwhile.
        derived.forms = _plain_forms(value)
    return derived.forms


def decoders_of(value: str) -> tuple[_Decoder, ...]:
    """``value``'s decoders (``_decode``), kept while it is held."""
    derived = _HELD.get(value)
    if derived is None:
        return _decoders(value)
    if derived.decoders is None:
        derived.decoders = _decoders(value)
    return derived.decoders
