"""The layers of docs/architecture.md hold: no import cycle, and no import from a lower layer
to a higher one (the foundation 1, modules 2, core 3, the fronts 4), every subpackage
included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"protocol": 0, "utils": 1, "model": 1, "history": 1, "modules": 2, "core": 3}
FRONTS = ("web", "cli", "a2a_server", "mcp_server")
FRONT_LAYER = 4
ENTRY_POINTS = ("main.py", "web_server.py")


def _our_modules() -> dict[str, Path]:
    """Every module of ours, by dotted name: the entry points and each package, walked."""
    found = {p.stem: ROOT / p for p in map(Path, ENTRY_POINTS)}
    for package in [*LAYERS, *FRONTS]:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _our_modules()


def _layer(module: str) -> int:
    return LAYERS.get(module.split(".")[0], FRONT_LAYER)


def _imports(path: Path) -> set[str]:
    """Our modules that `path` imports anywhere (top level, in functions, for type checking)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {name for name in names if name in MODULES}
    return found


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def test_the_graph_covers_every_layer_and_subpackage() -> None:
    assert {_layer(name) for name in GRAPH} == {0, 1, 2, 3, 4}
    assert "modules.sandbox.local_runner" in GRAPH["modules.sandbox.factory"]
    assert "core.main_terminal" in GRAPH["core.web_terminal"]
    assert all(package in GRAPH for package in FRONTS)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_reaches_up(module: str) -> None:
    upward = sorted(t for t in GRAPH[module] if _layer(t) > _layer(module))
    assert not upward, f"{module} (layer {_layer(module)}) imports a higher layer: {upward}"


def test_no_import_cycle() -> None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(GRAPH[node]):
            if state.get(target) == 1:
                cycle = [*path[path.index(target) :], target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
