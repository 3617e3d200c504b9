"""The process settings of ``playa._runtime``, each checked in a child process of its own."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from support.faults import FAULTS_OF_A_LARGE_STRING, PAGES

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the allocator settings are glibc's")


def child(script: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@glibc
def test_a_large_string_reuses_the_memory_of_the_one_before() -> None:
    tuned = child(
        "from playa._runtime import tune_allocator\n"
        "print(tune_allocator())\n" + FAULTS_OF_A_LARGE_STRING + "print(faults_of_a_large_string())\n"
    )
    untuned = child(FAULTS_OF_A_LARGE_STRING + "print(faults_of_a_large_string())\n")
    assert tuned[0] == "True"
    # Without the settings every large string is a fresh mapping, a fault per page.
    assert int(untuned[0]) > PAGES // 2
    assert int(tuned[1]) < PAGES // 20


def test_the_allocator_is_left_alone_where_it_is_not_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    from playa import _runtime

    def unknown(name: str) -> str:
        raise ValueError(f"unrecognized configuration name {name!r}")  # as musl's Python answers

    monkeypatch.setattr(os, "confstr", unknown)
    assert _runtime.tune_allocator() is False
