from __future__ import annotations

import importlib

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _hypothesis_regex_imported_early() -> None:
    """Import hypothesis's regex strategies once per session, at a shallow stack.

    Hypothesis imports them lazily on the first ``from_regex``, and pytest rewrites hypothesis's
    modules as they are imported; deep inside a test, CPython 3.11.7's compiler can then fail
    with "SystemError: AST constructor recursion depth mismatch".
    """
    importlib.import_module("hypothesis.strategies._internal.regex")
