"""Each package names its public surface in __all__, and every name there exists."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import playa

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
    "playa.mcp_remote.commands",
    "playa.mcp_remote.store",
    "playa.mcp_remote.transport",
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


def test_every_package_is_checked() -> None:
    """A new package names its public surface too: it cannot be left out of the list above."""
    root = Path(playa.__file__).parent
    found = {
        ".".join(("playa", *init.parent.relative_to(root).parts))
        for init in root.rglob("__init__.py")
        if not any(part.startswith("_") for part in init.parent.relative_to(root).parts)
    }
    assert found <= set(PACKAGES), sorted(found - set(PACKAGES))
