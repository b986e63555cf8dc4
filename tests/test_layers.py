"""The layers of docs/architecture.md hold for every package and entry point: no import cycle,
and no import from a lower layer to a higher one (protocol 0, the foundation 1, modules 2,
core 3, the fronts 4; the tests, benchmarks and scripts above them all). workspace_client, a
front, imports nothing of ours but protocol, and protocol nothing of ours at all; of other
packages, both only what pyproject.toml's dependencies install.

The packages are found in the tree: a new top-level package fails here until it has a layer."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = 5  # may import anything; nothing imports it but its own kind
LAYERS = {
    "protocol": 0,
    "utils": 1,
    "model": 1,
    "history": 1,
    "modules": 2,
    "core": 3,
    "web": 4,
    "cli": 4,
    "a2a_server": 4,
    "mcp_server": 4,
    "workspace_client": 4,
    "main": 4,
    "web_server": 4,
    "tests": TOP,
    "bench": TOP,  # folders of scripts, not packages: a module is named by its path
    "scripts": TOP,
}
SCRIPT_FOLDERS = ("bench", "scripts")
# What pydantic installs with itself, imported by protocol/ (pyproject.toml names pydantic).
WITH_PYDANTIC = {"pydantic_core", "typing_extensions"}


def _top_level() -> set[str]:
    """The top-level packages and entry points in the tree, and the folders of scripts."""
    found = {path.stem for path in ROOT.glob("*.py")}
    found |= {path.parent.name for path in ROOT.glob("*/__init__.py")}
    return found | {name for name in SCRIPT_FOLDERS if (ROOT / name).is_dir()}


def _our_modules() -> dict[str, Path]:
    """Every module of ours, by dotted name: the entry points and each package, walked."""
    found: dict[str, Path] = {}
    for top in _top_level():
        paths = (
            [ROOT / f"{top}.py"] if (ROOT / f"{top}.py").is_file() else (ROOT / top).rglob("*.py")
        )
        for path in paths:
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _our_modules()


def _layer(module: str) -> int:
    return LAYERS[module.split(".")[0]]


def _imported(path: Path) -> set[str]:
    """Every module `path` imports anywhere (top level, in functions, for type checking), and
    for `from X import Y` also X.Y, which may be a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


IMPORTED = {name: _imported(path) for name, path in MODULES.items()}
GRAPH = {
    name: {target for target in found if target in MODULES} for name, found in IMPORTED.items()
}


def test_every_top_level_package_has_a_layer() -> None:
    unplaced = sorted(_top_level() - LAYERS.keys())
    assert not unplaced, f"give these a layer in LAYERS (and docs/architecture.md): {unplaced}"
    assert not LAYERS.keys() - _top_level(), "LAYERS names what is not in the tree"


def test_the_graph_covers_every_layer_and_the_imports_it_should() -> None:
    assert {_layer(name) for name in GRAPH} == {0, 1, 2, 3, 4, TOP}
    assert "modules.sandbox.local_runner" in GRAPH["modules.sandbox.factory"]
    assert "core.main_terminal" in GRAPH["core.web_terminal"]
    assert "protocol.events" in GRAPH["workspace_client.stream"]
    assert "tests.kit.server" in GRAPH["bench.pace"]
    assert "main" in MODULES and "web_server" in MODULES


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_reaches_up(module: str) -> None:
    upward = sorted(t for t in GRAPH[module] if _layer(t) > _layer(module))
    assert not upward, f"{module} (layer {_layer(module)}) imports a higher layer: {upward}"


def _dependencies() -> set[str]:
    """The import names of what pyproject.toml's [project] dependencies install."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {
        requirement.split(";")[0].split("[")[0].split("=")[0].split("~")[0].split(">")[0]
        for requirement in project["dependencies"]
    }
    return {name.strip().lower().replace("-", "_") for name in names}


@pytest.mark.parametrize(
    ("package", "ours_allowed"), [("protocol", {"protocol"}), ("workspace_client", {"protocol"})]
)
def test_the_wire_and_the_client_import_what_they_may(package: str, ours_allowed: set[str]) -> None:
    """protocol imports nothing of ours outside itself and the client nothing but protocol; of
    other packages, each only the standard library and what `pip install .` brings."""
    others = _dependencies() | WITH_PYDANTIC
    assert {"pydantic", "simple_websocket"} <= others
    for module, found in IMPORTED.items():
        if module.split(".")[0] != package:
            continue
        tops = {name.split(".")[0] for name in found} - {package, "__future__"}
        ours = {top for top in tops if top in LAYERS} - ours_allowed
        assert not ours, f"{module} imports {sorted(ours)}: {package} may import {ours_allowed}"
        foreign = tops - LAYERS.keys() - sys.stdlib_module_names - others
        assert not foreign, f"{module} imports {sorted(foreign)}, which pyproject.toml lacks"


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
