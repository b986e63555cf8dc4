"""The templates a folder that commands write may hold (the workspace's agent definitions):
text, the given variables and conditions on them, nothing else.

Such a template renders outside the command sandbox, so it must render in time and memory
bounded by its size. Jinja2's sandbox keeps it away from Python's internals but bounds neither:
`range` loops nest, `'a' * 10**9`, `'x'.ljust(10**9)` or `'%0999999999d' % 1` build a gigabyte,
and the compiler folds constant expressions, so a template can explode before it is even
rendered. What passes here has no loop, call, attribute, filter, arithmetic or include: each of
its at most MAX_NODES nodes is evaluated at most once, on strings and constants of its own text
or the variables, so its output is at most its text plus MAX_NODES variables, and it is checked
before it is compiled. Reading it is bounded too: at most MAX_TOKENS tokens are lexed.
"""

from __future__ import annotations

from collections.abc import Collection

from jinja2 import Environment, TemplateError, nodes

MAX_TOKENS = 1_000
MAX_NODES = 300
MAX_DEPTH = 32
SHAPE = (
    "text, variables, constants, `~`, comparisons, `and`/`or`/`not`, `x if c else y` and "
    "{% if %} blocks"
)
_ALLOWED = (
    nodes.Template,
    nodes.Output,
    nodes.TemplateData,
    nodes.Name,
    nodes.Const,
    nodes.If,
    nodes.CondExpr,
    nodes.Compare,
    nodes.Operand,
    nodes.Not,
    nodes.And,
    nodes.Or,
    nodes.Concat,
)
_WORDS = {
    nodes.For: "a for loop",
    nodes.Call: "a call",
    nodes.Getattr: "an attribute",
    nodes.Getitem: "an item or slice",
    nodes.Filter: "a filter",
    nodes.Test: "a test (`is`)",
    nodes.BinExpr: "arithmetic",
    nodes.Neg: "arithmetic",
    nodes.Pos: "arithmetic",
    nodes.Macro: "a macro",
    nodes.Assign: "{% set %}",
    nodes.AssignBlock: "{% set %}",
    nodes.Include: "an include",
    nodes.Import: "an import",
    nodes.FromImport: "an import",
    nodes.Extends: "{% extends %}",
    nodes.List: "a list",
    nodes.Tuple: "a tuple",
    nodes.Dict: "a dict",
}


def check_plain(env: Environment, source: str, variables: Collection[str]) -> None:
    """Refuse (TemplateError, saying what and on which line) a template that holds more than
    SHAPE says or names anything but `variables`."""
    for count, _ in enumerate(env.lex(source), start=1):
        if count > MAX_TOKENS:
            raise TemplateError(f"it is too long a template: over {MAX_TOKENS:,} tokens")
    try:
        tree = env.parse(source)
    except RecursionError:
        raise TemplateError("its expressions are nested too deeply") from None
    _check_nodes(tree, variables)


def _check_nodes(tree: nodes.Template, variables: Collection[str]) -> None:
    todo: list[tuple[nodes.Node, int]] = [(tree, 0)]
    seen = 0
    while todo:
        node, depth = todo.pop()
        seen += 1
        where = f"line {getattr(node, 'lineno', 1)}"
        if seen > MAX_NODES:
            raise TemplateError(f"it is too large a template: over {MAX_NODES:,} parts")
        if depth > MAX_DEPTH:
            raise TemplateError(f"{where}: nested over {MAX_DEPTH} levels deep")
        if not isinstance(node, _ALLOWED):
            raise TemplateError(f"{where}: it may hold {SHAPE}, not {_word(node)}")
        if isinstance(node, nodes.Name) and (node.ctx != "load" or node.name not in variables):
            known = ", ".join(sorted(variables))
            raise TemplateError(f"{where}: {node.name!r} is not one of its variables ({known})")
        todo.extend((child, depth + 1) for child in node.iter_child_nodes())


def _word(node: nodes.Node) -> str:
    for kind, word in _WORDS.items():
        if isinstance(node, kind):
            return word
    return type(node).__name__
