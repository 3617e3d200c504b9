"""A child process's page faults while it makes a large string, freed before it makes another."""

from __future__ import annotations

__all__ = ["FAULTS_OF_A_LARGE_STRING", "PAGES"]

PAGES = 40_000_000 // 4096
"""The pages of the string: ten million emoji, 40 MB, over the largest mmap threshold glibc chooses."""

FAULTS_OF_A_LARGE_STRING = """
import resource

def faults_of_a_large_string() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    "\\U0001F600" * 10_000_000  # made, written and freed
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults_of_a_large_string()  # the first one may grow the heap
"""
"""Script text that defines ``faults_of_a_large_string()`` and makes one large string first."""
