"""The arrows between the parts point one way: the layout is the architecture."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "playa"

# What each part may import from Playa (besides itself, `playa.exceptions`, `playa._files` and
# `playa.__version__`: the bottom layer every part stands on).
ALLOWED = {
    "host": set(),
    "mcp": {"host"},
    "mcp_remote": {"host", "mcp"},
    "console": {"host"},
    "telegram": {"host", "_asgi"},
}


def playa_imports(path: Path) -> set[str]:
    """The top-level Playa parts a module imports (``playa.X`` or ``..X``)."""
    package = path.relative_to(SRC.parent).with_suffix("").parts[:-1]  # e.g. ("playa", "mcp_remote")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = [".".join([*base, node.module] if node.module else base)]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "playa" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_each_part_imports_only_the_parts_below_it(part: str) -> None:
    allowed = ALLOWED[part] | {part, "exceptions", "_files", "__init__"}
    for path in sorted((SRC / part).rglob("*.py")):
        imported = playa_imports(path)
        assert imported <= allowed, f"{path.relative_to(SRC)} imports {sorted(imported - allowed)}"


def test_the_host_never_imports_an_extension_or_a_front_end() -> None:
    for path in sorted((SRC / "host").rglob("*.py")):
        assert not playa_imports(path) & {"mcp", "mcp_remote", "console", "telegram", "cli"}
