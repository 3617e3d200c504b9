"""Small modules, functions and classes: each reads in one sitting.

No source file over 500 lines, no function over 80, no class with more than 25 methods, unless a
comment right above it (or at the top of the file) starts with ``# Long:`` and says why it must be so.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "playa"
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_METHODS = 25
REASON = "# Long:"


def explained(lines: list[str], first: int) -> bool:
    """Whether a ``# Long:`` comment stands right above line ``first`` (1-based), decorators aside."""
    at = first - 2
    while at >= 0 and lines[at].lstrip().startswith("@"):
        at -= 1
    while at >= 0 and lines[at].lstrip().startswith("#"):
        if lines[at].lstrip().startswith(REASON):
            return True
        at -= 1
    return False


def oversized(path: Path, root: Path = SRC) -> list[str]:
    text = path.read_text()
    lines = text.splitlines()
    found: list[str] = []
    name = path.relative_to(root)
    if len(lines) > MAX_FILE_LINES and not any(line.startswith(REASON) for line in lines[:20]):
        found.append(f"{name}: {len(lines)} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES and not explained(lines, first):
                found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
        elif isinstance(node, ast.ClassDef):
            methods = sum(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) for item in node.body)
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            if methods > MAX_METHODS and not explained(lines, first):
                found.append(f"{name}:{node.lineno} {node.name}: {methods} methods")
    return found


def test_no_file_function_or_class_of_the_source_is_oversized() -> None:
    found = [problem for path in sorted(SRC.rglob("*.py")) for problem in oversized(path)]
    assert not found, "\n".join(found)


def test_the_size_check_finds_what_is_oversized_and_takes_a_reason(tmp_path: Path) -> None:
    body = "".join(f"    x = {i}\n" for i in range(MAX_FUNCTION_LINES))
    methods = "".join(f"    def m{i}(self) -> None: ...\n" for i in range(MAX_METHODS + 1))
    probe = tmp_path / "probe.py"
    probe.write_text(f"def f() -> None:\n{body}\n\nclass C:\n{methods}")
    assert oversized(probe, tmp_path) == ["probe.py:1 f: 81 lines", "probe.py:84 C: 26 methods"]
    probe.write_text(f"# Long: a table\ndef f() -> None:\n{body}\n\n# Long: a protocol\nclass C:\n{methods}")
    assert oversized(probe, tmp_path) == []
