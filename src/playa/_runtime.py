"""Process-wide settings the ``playa`` command applies once, before its host starts."""

from __future__ import annotations

import ctypes
import gc
import os
from typing import Final

__all__ = [
    "GC_THRESHOLDS",
    "HEAP_KEPT_FREE",
    "HEAP_LARGEST",
    "tune_allocator",
    "tune_garbage_collector",
    "tune_runtime",
]

GC_THRESHOLDS: Final = (20_000, 50, 10)
"""The collector's thresholds for a host (CPython's defaults: 700, 10, 10)."""

HEAP_LARGEST: Final = 64 * 1024 * 1024
"""The largest block glibc's malloc takes from its heap rather than from a mapping of its own."""
HEAP_KEPT_FREE: Final = 128 * 1024 * 1024
"""How much freed memory at the heap's top glibc keeps before giving it back to the system."""

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3


def tune_runtime() -> bool:
    """Everything this module sets, as the ``playa`` command's process runs with it.

    Returns whether the allocator's settings were applied (see :func:`tune_allocator`).
    """
    tune_garbage_collector()
    return tune_allocator()


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


def tune_allocator() -> bool:
    """Let a large string reuse memory the process already has, where the allocator is glibc's.

    A tool result of megabytes is a string of up to four bytes a character, and redacting it
    makes another of the same size. glibc gives each block over its mmap threshold a fresh
    mapping and unmaps it when the block is freed; the threshold rises as such blocks are
    freed, but never past 32 MiB. Each new page of a fresh mapping is a page fault when first
    written: for a 40 MB string (ten million characters with emoji) some 10,000 faults, about
    30 ms on the machine of docs/benchmarks.md, as long as redacting it took. With blocks of
    up to :data:`HEAP_LARGEST` taken from the heap, and up to :data:`HEAP_KEPT_FREE` of freed
    memory kept at its top, the next large string is written into pages already mapped. The
    price: after a burst of large results the process may keep that much memory it no longer
    uses. Returns whether the settings were applied: False where the C library is not glibc.
    """
    if not _glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, HEAP_LARGEST)) and bool(mallopt(_M_TRIM_THRESHOLD, HEAP_KEPT_FREE))


def _glibc() -> bool:
    """Whether the C library is glibc: only glibc answers ``CS_GNU_LIBC_VERSION`` (``glibc 2.36``)."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):  # a name this system does not know
        return False
    return version is not None and version.startswith("glibc ")
