"""Each package names its public surface in __all__, and every name there exists."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "playa",
    "playa.agent",
    "playa.core",
    "playa.core.secrets",
    "playa.db",
    "playa.console",
    "playa.exceptions",
    "playa.mcp",
    "playa.mcp_remote",
    "playa.telegram",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_exist_and_are_public(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(set(exported)) == len(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr} is missing"
        assert not attr.startswith("_") or attr == "__version__"
