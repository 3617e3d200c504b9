"""The arrows between the parts point one way: the layout is the architecture."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "playa"

# What each part may import from Playa (besides itself, `playa.exceptions`, `playa._files` and
# `playa.__version__`: the bottom layer every part stands on). core ← mcp ← mcp_remote and
# core ← agent ← console, telegram; `cli` stands on top of them all.
ALLOWED = {
    "core": set(),
    "mcp": {"core"},
    "mcp_remote": {"core", "mcp"},
    "agent": {"core"},
    "db": {"core"},
    "console": {"core", "agent"},
    "telegram": {"core", "agent", "_asgi"},
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


def test_the_core_never_imports_the_agent_an_extension_or_a_front_end() -> None:
    for path in sorted((SRC / "core").rglob("*.py")):
        assert not playa_imports(path) & {"agent", "mcp", "mcp_remote", "console", "telegram", "cli"}


# The agent's library and the provider SDKs it drives: what an extension must never load.
MODEL_LIBRARIES = (
    "pydantic_ai",
    "pydantic_graph",
    "openai",
    "anthropic",
    "google.genai",
    "groq",
    "mistralai",
)


def loaded_after_import(module: str) -> set[str]:
    """The modules a fresh interpreter holds after ``import module`` (nothing else imported first)."""
    code = f"import sys, {module}; print('\\n'.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return set(done.stdout.split())


@pytest.mark.parametrize("module", ["playa.core", "playa.mcp", "playa.mcp_remote"])
def test_the_core_and_the_extension_load_no_model_library(module: str) -> None:
    loaded = loaded_after_import(module)
    assert module in loaded
    models = sorted(m for m in loaded if m.startswith(MODEL_LIBRARIES))
    assert not models, f"import {module} loads {models[:5]}"


def test_no_package_loads_its_names_lazily() -> None:
    # A package's names are plain imports: no module-level __getattr__ hides a layer's edge.
    for path in sorted(SRC.rglob("__init__.py")):
        tree = ast.parse(path.read_text())
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert "__getattr__" not in defined, path.relative_to(SRC)


def private_imports_from_outside(root: Path, base: str) -> list[str]:
    """Imports of another sub-package's private module (``x._y`` from outside ``x``), in the
    files under ``root`` (whose dotted name is ``base``)."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        package = [*base.split("."), *path.relative_to(root).parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                target = [*package[: len(package) - node.level + 1], *(node.module or "").split(".")]
            else:
                target = (node.module or "").split(".")
            if target[0] != "playa":
                continue
            target = [t for t in target if t]
            for i, part in enumerate(target):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(target[:i])
                    here = ".".join(package)
                    if here != owner and not here.startswith(owner + "."):
                        found.append(f"{path.relative_to(root)}: {'.'.join(target)}")
                    break
    return found


def test_nothing_outside_a_package_imports_its_private_modules() -> None:
    found = private_imports_from_outside(SRC, "playa")
    found = [
        f for f in found if not f.split(": ")[1].startswith(("playa._files", "playa._asgi", "playa._runtime"))
    ]
    assert not found, "\n".join(found)


def test_the_tests_take_a_packages_exported_names_from_the_package() -> None:
    """A test may reach into a private module for what it alone tests, never for a public name."""
    tests = Path(__file__).resolve().parent
    found: list[str] = []
    for path in sorted(tests.rglob("*.py")):
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            parts = node.module.split(".")
            # playa.<package>[.<sub>]._<module>: a package's private module (playa._files has no package).
            private = next((n for n, part in enumerate(parts) if part.startswith("_")), None)
            if parts[0] != "playa" or private is None or private < 2:
                continue
            package = importlib.import_module(".".join(parts[:private]))
            public = {alias.name for alias in node.names} & set(getattr(package, "__all__", ()))
            if public:
                found.append(f"{path.relative_to(tests)}: {sorted(public)} from {package.__name__}")
    assert not found, "\n".join(found)


def module_graph(part: str) -> dict[str, set[str]]:
    """Which modules of a part import which others of it (dotted below the part, e.g.
    ``store._seal``), annotations-only imports included."""
    root = SRC / part
    modules = {
        ".".join(path.relative_to(root).with_suffix("").parts).removesuffix("__init__").rstrip("."): path
        for path in root.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = path.relative_to(root).parts[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = list(package[: len(package) - node.level + 1])
            elif (node.module or "").startswith(f"playa.{part}."):
                base = []
            else:
                continue
            module = (node.module or "").removeprefix(f"playa.{part}.") if not node.level else node.module
            target = ".".join([*base, module] if module else base)
            if target in modules:
                found.add(target)
            if target in modules and modules[target].name == "__init__.py":
                found |= {f"{target}.{a.name}".lstrip(".") for a in node.names} & modules.keys()
        graph[name] = found - {name, ""}
    return graph


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for nxt in sorted(graph[node]):
            if (cycle := visit(nxt, [*path, node])) is not None:
                return cycle
        done.add(node)
        return None

    for start in sorted(graph):
        if (cycle := visit(start, [])) is not None:
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("part", ["core", "agent", "mcp_remote", "mcp", "console", "telegram"])
def test_no_module_of_a_part_imports_one_that_imports_it_back(part: str) -> None:
    # Annotations-only imports count too: a cycle there is the same tangle, only hidden.
    assert cycle_in(module_graph(part)) is None


def command_modules(graph: dict[str, set[str]]) -> set[str]:
    """The modules of the commands' package (``commands`` and ``commands._x``)."""
    return {name for name in graph if name.split(".")[0] == "commands"}


# What the commands may use of mcp_remote besides their own package: the servers service, its
# servers' state, the texts it shares with the prompt, and the store's names.
COMMANDS_USE = {"_chat", "_server", "_views", "_callback_listener", "store"}


def test_the_commands_call_the_servers_service_and_never_the_extension() -> None:
    graph = module_graph("mcp_remote")
    commands = command_modules(graph)
    assert "commands" in graph["_extension"]
    assert {"commands._servers", "commands._add_request"} <= commands
    for name in commands:
        assert "_extension" not in graph[name], name
        # Never one of the service's parts (logins, reviews, calls, policies): the service's public calls.
        above = {target for target in graph[name] if target not in commands and target not in COMMANDS_USE}
        assert not above, f"{name} imports {sorted(above)}"


# mcp_remote by concern: lifecycle and commands (its top modules) use the transport, which reads
# the store; the store is the leaf.
LAYERS = {"store": {"store"}, "transport": {"store", "transport"}}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_mcp_remote_layers_point_one_way(layer: str) -> None:
    graph = module_graph("mcp_remote")
    assert any(name.startswith(f"{layer}.") for name in graph)
    for name, imported in graph.items():
        if name.startswith(f"{layer}."):
            above = {target for target in imported if target.split(".")[0] not in LAYERS[layer]}
            assert not above, f"{name} imports {sorted(above)}"


@pytest.mark.parametrize("path", sorted((SRC / "mcp_remote" / "commands").glob("*.py")), ids=lambda p: p.name)
def test_the_commands_reach_through_nothing(path: Path) -> None:
    # The service's public calls only, and its parts' (logins, review, policies): not its file,
    # its connector or its settings, nor anyone's private parts (each was once a rule of the
    # service's, written again in a command).
    tree = ast.parse(path.read_text())
    touched = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not touched & {"store", "connector", "settings", "egress", "extension", "approvals"}
    assert not {name for name in touched if name.startswith("_")}


def test_whether_a_tool_is_withheld_is_answered_without_a_model_library() -> None:
    # /mcp_list asks it of the session's rules: an extension's command must not load the agent.
    code = """
import sys
from types import SimpleNamespace
from playa.core import ToolRules
rules = ToolRules()
fine = SimpleNamespace(name="fine", description="ok", parameters={"type": "object"})
bad = SimpleNamespace(name="bad name", description="ok", parameters={"type": "object"})
print(rules.withheld(fine), "|", rules.withheld(bad), "|", "pydantic_ai" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "None | its name is not 1 to 64 letters, digits, _ or - | False"


# ChatServers' parts (logins, review, policies, calls) and its servers are handed what they use:
# none reaches back to the service that holds them, nor to the commands or the extension above it.
SERVICE_PARTS = ("_login", "_review", "_calls", "_policies", "_shared")
# A server and its own parts: below the chat's parts, which work on servers (a server that
# called them would close a loop at run time: binding -> review -> binding).
SERVER_MODULES = ("_server", "_server_login", "_server_review")


@pytest.mark.parametrize("part", SERVICE_PARTS + SERVER_MODULES)
def test_the_parts_of_the_servers_service_never_import_it_or_what_is_above_it(part: str) -> None:
    imported = module_graph("mcp_remote")[part]
    assert not imported & {"_chat", "_extension", *command_modules(module_graph("mcp_remote"))}, (
        f"{part} imports {sorted(imported)}"
    )


@pytest.mark.parametrize("module", SERVER_MODULES)
def test_a_server_never_imports_the_chats_parts_that_work_on_it(module: str) -> None:
    imported = module_graph("mcp_remote")[module]
    assert not imported & {"_login", "_review", "_calls", "_policies"}, f"{module} imports {sorted(imported)}"


def written_attributes(tree: ast.AST) -> set[str]:
    """Each attribute assigned to in ``tree`` whose chain starts at a name other than ``self``,
    as written (``state.connection``, ``server.review.held``)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for item in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(item, ast.Attribute) and ast.unparse(item).split(".")[0] != "self":
                    found.add(ast.unparse(item))
    return found


@pytest.mark.parametrize("part", ["_chat", *SERVICE_PARTS])
def test_only_a_server_and_its_own_parts_write_its_state(part: str) -> None:
    # One writer per field: a part asks the server (or its login, or its review) to change,
    # and never assigns to what they hold.
    tree = ast.parse((SRC / "mcp_remote" / f"{part}.py").read_text())
    servers = {name for name in written_attributes(tree) if name.split(".")[0] in {"state", "server"}}
    assert not servers, f"{part} writes {sorted(servers)}"


@pytest.mark.parametrize("part", ["Logins:_login", "Review:_review", "Policies:_policies", "Calls:_calls"])
def test_the_parts_of_the_servers_service_are_handed_no_callbacks(part: str) -> None:
    # Objects and values, not functions into the service: a callback hides who owns what.
    name, module = part.split(":")
    tree = ast.parse((SRC / "mcp_remote" / f"{module}.py").read_text())
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name]
    (init,) = [node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "__init__"]
    arguments = [*init.args.args, *init.args.kwonlyargs]
    callables = [
        a.arg for a in arguments if a.annotation is not None and "Callable" in ast.unparse(a.annotation)
    ]
    assert callables in ([], ["clock"]), f"{name} is handed {callables}"


# The transport talks to servers: of the core it needs only the secrets' rules, the text helpers
# and the settings' floor rule, never the person's side (the UI, questions and answers live above
# it, in the service).
TRANSPORT_CORE_NAMES = {"Redactor", "check_at_least", "one_line", "outbound_secrets"}


def core_names_imported(source: str) -> set[str]:
    """The names a module of ``mcp_remote/transport`` imports from ``playa.core`` (or a module under it)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if (node.level == 0 and module.startswith("playa.core")) or (
                node.level == 3 and module.split(".")[0] == "core"
            ):
                names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {"*" for alias in node.names if alias.name.startswith("playa.core")}
    return names


@pytest.mark.parametrize(
    "path", sorted((SRC / "mcp_remote" / "transport").glob("*.py")), ids=lambda p: p.name
)
def test_the_transport_imports_from_the_core_only_secrets_and_text_helpers(path: Path) -> None:
    assert core_names_imported(path.read_text()) <= TRANSPORT_CORE_NAMES, path.name


def test_the_transport_check_sees_the_persons_side_imported() -> None:
    source = "from ...core import Question, Redactor\nfrom playa.core.x import UI\nimport playa.core\n"
    assert core_names_imported(source) - TRANSPORT_CORE_NAMES == {"Question", "UI", "*"}
