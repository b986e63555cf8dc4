"""YAML text read safely, with libyaml's parser when PyYAML was built with it: five times
faster than the pure-Python one on the agent and skill files every start reads.

Bounded too, since agent files and skills may come from the workspace, which commands write: a
document is measured before its values are built, each alias counted as what it stands for, so
a billion laughs (aliases of aliases of lists) or an alias inside its own anchor is refused
rather than handed to code that walks it; nesting deeper than MAX_DEPTH is refused the same way.
"""

from __future__ import annotations

from typing import IO, Any

import yaml

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_VALUES = 100_000  # values of one document, aliases counted as what they stand for
MAX_DEPTH = 64


def safe_load(text: str | IO[str], max_values: int = MAX_VALUES) -> Any:
    """`yaml.safe_load`: plain data only, never an object of a Python class; a document over
    `max_values` values or MAX_DEPTH levels is a yaml.YAMLError."""
    loader = _SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _measure(node, max_values)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def compose(text: str) -> yaml.Node | None:
    """The document's nodes, unbuilt (keys with their lines), composed by libyaml when it can:
    the pure-Python composer recurses once per level."""
    return yaml.compose(text, Loader=_SAFE_LOADER)


def _measure(root: yaml.Node, max_values: int) -> None:
    """Refuse a document too large once its aliases are expanded, too deep, or circular.

    Each node is visited once (shared ones are remembered), children before their parent; one
    with more distinct nodes than `max_values` is refused as soon as that many were seen."""
    too_many = yaml.YAMLError(
        f"the document holds over {max_values:,} values once its aliases are expanded; it is "
        "refused"
    )
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    path: set[int] = set()  # the nodes being measured: reaching one again is a cycle
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    while todo:
        node, children_done = todo.pop()
        key = id(node)
        if children_done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(kid)] for kid in kids)
            depth[key] = 1 + max((depth[id(kid)] for kid in kids), default=0)
            path.discard(key)
            if size[key] > max_values:
                raise too_many
            if depth[key] > MAX_DEPTH:
                raise yaml.YAMLError(f"the document nests over {MAX_DEPTH} levels; it is refused")
        elif key in path:
            raise yaml.YAMLError("an alias refers to the value it is part of; it is refused")
        elif key not in size:
            if len(size) + len(path) >= max_values:
                raise too_many
            path.add(key)
            todo.append((node, True))
            todo.extend((kid, False) for kid in _children(node) if id(kid) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
