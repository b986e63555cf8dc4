"""YAML read safely and within bounds: aliases work, but a document that expands past its
bound, refers to itself or nests too deep is refused before its values are built."""

from __future__ import annotations

import time

import pytest
import yaml

from utils.yaml_text import MAX_DEPTH, MAX_VALUES, compose, safe_load


def laughs(levels: int, merge: bool = False) -> str:
    """A billion laughs: each level nine aliases of the one below (as a merge, or a list)."""
    lines = ["l0: &l0 {a: 1, b: 2}" if merge else "l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for n in range(1, levels):
        refs = ", ".join([f"*l{n - 1}"] * 9)
        lines.append(f"l{n}: &l{n} {{<<: [{refs}]}}" if merge else f"l{n}: &l{n} [{refs}]")
    return "\n".join(lines) + "\n"


def test_anchors_and_aliases_still_load() -> None:
    data = safe_load("base: &base {model: m, timeout: 5}\nweb: {<<: *base, port: 1}\nalso: *base\n")
    assert data == {
        "base": {"model": "m", "timeout": 5},
        "web": {"model": "m", "timeout": 5, "port": 1},
        "also": {"model": "m", "timeout": 5},
    }
    assert safe_load("") is None and safe_load("just text") == "just text"
    assert safe_load(laughs(5)) is not None  # 9**4 values: within the bound


@pytest.mark.parametrize("merge", [False, True])
def test_a_billion_laughs_is_refused_at_once(merge: bool) -> None:
    started = time.monotonic()
    with pytest.raises(yaml.YAMLError, match=f"over {MAX_VALUES:,} values"):
        safe_load(laughs(10, merge))
    assert time.monotonic() - started < 5  # measured, never expanded: milliseconds


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: &a [1, *a]\n", "refers to the value it is part of"),
        ("a: &a {b: *a}\n", "refers to the value it is part of"),
        ("x: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nests over {MAX_DEPTH}"),
    ],
)
def test_cycles_and_deep_nesting_are_refused(text: str, said: str) -> None:
    with pytest.raises(yaml.YAMLError, match=said):
        safe_load(text)


def test_compose_gives_the_keys_lines_without_recursing_per_level() -> None:
    node = compose("name: x\ntools: " + "[" * 900 + "]" * 900 + "\n")
    assert isinstance(node, yaml.MappingNode)
    assert [(key.value, key.start_mark.line) for key, _ in node.value] == [
        ("name", 0),
        ("tools", 1),
    ]
