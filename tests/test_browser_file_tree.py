"""The page's file tree through a burst of files another program makes and deletes, in a real
headless Chromium: it ends showing what is on disk, and says when the tree is capped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.browser import Served, open_page
from tests.kit.processes import live_command_lines

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(files={"keep/notes.txt": "kept\n", "README.md": "# hi\n"}),
]
MAKE = """
import os, sys
root, folders = sys.argv[1], int(sys.argv[2])
for d in range(folders):
    os.makedirs(os.path.join(root, "churn", f"d{d:02d}"))
    for f in range(100):
        with open(os.path.join(root, "churn", f"d{d:02d}", f"f{f:03d}.txt"), "w") as out:
            out.write("x")
"""
TREE_ROWS = "#file-tree .tree-entry"
CAPPED = "[data-testid=tree-capped]"


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    with open_page(browser, served, ready=[f'{TREE_ROWS}[data-path="keep"]']) as page:
        yield page


def on_disk(root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in root.rglob("*")}


def shown(page: Any) -> set[str]:
    return set(page.eval_on_selector_all(TREE_ROWS, "rows => rows.map(r => r.dataset.path)"))


def burst(root: Path, folders: int) -> None:
    subprocess.run([sys.executable, "-c", MAKE, str(root), str(folders)], check=True)


def test_after_a_burst_and_its_deletion_the_tree_shows_what_is_on_disk(
    page: Any, served: Served
) -> None:
    _, _, workspace = served
    burst(workspace, 20)
    page.wait_for_selector(f'{TREE_ROWS}[data-path="churn/d19/f099.txt"]', state="attached")
    page.wait_for_function(
        f"() => document.querySelectorAll('{TREE_ROWS}').length === {len(on_disk(workspace))}"
    )
    assert shown(page) == on_disk(workspace)
    subprocess.run(["rm", "-rf", str(workspace / "churn")], check=True)
    page.wait_for_selector(f'{TREE_ROWS}[data-path="churn"]', state="detached")
    page.wait_for_selector(f'{TREE_ROWS}[data-path="keep/notes.txt"]', state="attached")
    assert shown(page) == on_disk(workspace) == {"keep", "keep/notes.txt", "README.md"}


def test_a_capped_tree_says_so_until_it_is_whole_again(page: Any, served: Served) -> None:
    _, _, workspace = served
    assert page.locator(CAPPED).count() == 0
    burst(workspace, 60)  # 6,060 entries: past the 5,000 the tree lists
    page.wait_for_selector(CAPPED)
    assert "first 5,000 entries" in page.inner_text(CAPPED)
    assert len(shown(page)) == 5000
    subprocess.run(["rm", "-rf", str(workspace / "churn")], check=True)
    page.wait_for_selector(CAPPED, state="detached")
    # The tree may be reloaded while rm still runs: the rest of the deletion follows as changes.
    page.wait_for_selector(f'{TREE_ROWS}[data-path="churn"]', state="detached")
    assert shown(page) == on_disk(workspace)


STOPPED = "[data-testid=tree-stopped]"


def test_the_tree_says_when_it_no_longer_follows_changes(page: Any, served: Served) -> None:
    """Last in this module: it ends the server's watcher."""
    server, _, _ = served
    assert server.pid is not None and page.locator(STOPPED).count() == 0
    [watcher] = [
        pid
        for pid, argv in live_command_lines(server.pid).items()
        if "modules.workspace.file_watcher" in argv
    ]
    os.kill(watcher, signal.SIGKILL)
    page.wait_for_selector(STOPPED)
    assert "Live file-tree updates stopped" in page.inner_text(STOPPED)
    page.reload()
    page.wait_for_selector(f'{TREE_ROWS}[data-path="keep"]')
    page.wait_for_selector(STOPPED)  # a tree loaded later says so too
