"""The layers of docs/architecture.md hold: no import cycle, and no import from a lower layer
to a higher one (utils 1, modules 2, core 3, the fronts 4)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"utils": 1, "modules": 2, "core": 3}
FRONT_LAYER = 4


def _our_modules() -> dict[str, Path]:
    found = {p.stem: p for p in ROOT.glob("*.py")}
    for package in PACKAGES:
        found |= {f"{package}.{p.stem}": p for p in (ROOT / package).glob("*.py")}
    return {name: path for name, path in found.items() if not name.endswith("__init__")}


MODULES = _our_modules()


def _layer(module: str) -> int:
    return PACKAGES.get(module.split(".")[0], FRONT_LAYER)


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


def test_the_graph_covers_every_layer() -> None:
    layers = {_layer(name) for name in GRAPH}
    assert layers == {1, 2, 3, 4}
    assert "core.main_terminal" in GRAPH["core.services"] or GRAPH["core.main_terminal"]


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
