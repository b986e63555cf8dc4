"""A conversation's title from its first exchange (history/titles.py)."""

from __future__ import annotations

import pytest

from history.titles import title_from


@pytest.mark.parametrize(
    ("message", "title"),
    [
        ("rename my_var_name in utils_helpers.py", "rename my_var_name in utils_helpers.py"),
        ("fix __init__.py imports. Then test", "fix __init__.py imports"),
        ("_important_ fix of the parser", "important fix of the parser"),
        ("make it __bold__. Then go", "make it bold"),
        ("**Add** a `cache` to # the loader", "Add a cache to the loader"),
    ],
)
def test_a_title_keeps_names_and_drops_markdown_marks(message: str, title: str) -> None:
    assert title_from(message) == title
