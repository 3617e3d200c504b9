"""Process-wide settings the ``playa`` command applies once, before its host starts."""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["GC_THRESHOLDS", "tune_garbage_collector"]

GC_THRESHOLDS: Final = (20_000, 50, 10)
"""The collector's thresholds for a host (CPython's defaults: 700, 10, 10)."""


def tune_garbage_collector() -> None:
    """Let short-lived objects die young, so full collections stay rare in a host with many chats.

    Every chat holds about a thousand objects for as long as it lives: its session, its
    connections' tasks, streams and cancel scopes. A connect or a call allocates thousands
    more that live for milliseconds. With CPython's default thresholds the young
    generations are collected so often that those objects are still in flight, so they are
    promoted to the oldest generation, and its full collections then run again and again,
    each over every open chat. Connecting 1,000 chats with two servers each, that took a
    quarter of the host's CPU (20 full collections of about 0.3 s each); with these
    thresholds there was none, and the young collections cost about a second in all. A young
    generation of 20,000 objects is a few megabytes. What closed chats leave in reference
    cycles has lived long enough to be old, and the host frees it itself as chats close
    (``Host._collect_closed``).
    """
    gc.set_threshold(*GC_THRESHOLDS)
