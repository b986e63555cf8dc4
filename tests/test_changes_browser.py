"""The Changes panel in Chromium, desktop and phone, through the real server on a git
workspace: a task's diff as `git diff` shows the same change, the tree's git marks, the branch
in the status bar, staging and a commit that `git log` then holds, an open panel following a
task as it changes files, and undo's preview showing the diff it takes back."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, Reply
from tests.kit.browser import Served, open_page, send
from tests.kit.waits import wait_until

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("git") is None, reason="the git program is missing"),
    pytest.mark.server(files={"README.md": "# hi\n"}),
]
PHONE = {"width": 390, "height": 844}
LINES = "".join(f"line {n}\n" for n in range(1, 31))


def git(ws: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ws, capture_output=True, text=True, check=True)
    return done.stdout


def hunks(diff: str) -> list[str]:
    """A diff's lines from its first hunk on, without what git names after a hunk's `@@`."""
    text = re.sub(r"^(@@ [^@]* @@).*$", r"\1", diff[diff.index("@@") :], flags=re.M)
    return [line for line in text.splitlines() if line]


@pytest.fixture
def repository(served: Served, request: pytest.FixtureRequest) -> tuple[Path, str]:
    """The workspace as a git repository with a committed file of this test's own."""
    ws = served[2]
    if not (ws / ".git").is_dir():
        git(ws, "init", "-q", "-b", "main")
    name = f"notes-{request.node.callspec.id}.txt"
    (ws / name).write_text(LINES)
    git(ws, "add", name)
    git(ws, "-c", "user.name=T", "-c", "user.email=t@t", "commit", "-q", "-m", f"add {name}")
    return ws, name


@pytest.fixture(params=["desktop", "phone"])
def page(request: pytest.FixtureRequest, browser: Any, served: Served) -> Iterator[Any]:
    phone = request.param == "phone"
    options: dict[str, Any] = (
        {"viewport": PHONE, "is_mobile": True, "has_touch": True} if phone else {}
    )
    with open_page(browser, served, ready=["#file-tree .tree-entry"], **options) as page:
        yield page


def test_a_task_s_diff_matches_git_then_it_is_staged_and_committed(
    page: Any, served: Served, repository: tuple[Path, str]
) -> None:
    _, fake, _ = served
    ws, name = repository
    edit = f"sed -i 's/^line 7$/line seven/; s/^line 22$/twenty-two/' {name}"
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": edit})]), Reply(content="Edited.")
    )
    send(page, "edit the notes")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    expected = hunks(git(ws, "diff", "--", name))

    mark = page.locator(f'#file-tree .tree-entry[data-path="{name}"] [data-testid=tree-git]')
    mark.wait_for(state="attached")
    assert mark.text_content() == "M"
    branch = page.locator("[data-testid=status-branch]")
    branch.wait_for(state="attached")
    page.wait_for_function("() => !document.querySelector('[data-testid=status-branch]').hidden")
    assert branch.locator("[data-role=branch]").text_content() == "main"

    page.click("[data-testid=changes-toggle]")
    shown = page.locator(f'[data-testid=changes-task] [data-path="{name}"] pre.diff')
    shown.wait_for()
    assert hunks(shown.text_content() or "") == expected
    page.click("[data-testid=changes-tab-since]")
    since = page.locator(f'[data-testid=changed-file][data-path="{name}"] pre.diff')
    since.wait_for()
    assert hunks(since.text_content() or "") == expected

    page.click("[data-testid=changes-tab-git]")
    page.click(f'[data-testid=git-unstaged] li[data-path="{name}"] [data-testid=git-stage]')
    page.wait_for_selector(f'[data-testid=git-staged] li[data-path="{name}"]')
    page.click(f'[data-testid=git-staged] li[data-path="{name}"] .git-path')
    staged = page.locator("[data-testid=git-diff] pre.diff")
    staged.wait_for()
    assert hunks(staged.text_content() or "") == expected
    page.fill("[data-testid=git-message]", f"Edit {name}")
    page.click("[data-testid=git-commit]")
    page.wait_for_selector("[data-testid=git-committed]")
    assert git(ws, "log", "-1", "--format=%s").strip() == f"Edit {name}"
    mark.wait_for(state="detached")  # nothing changed since the commit: no mark


def test_undo_s_preview_shows_the_diff_it_takes_back(
    page: Any, served: Served, repository: tuple[Path, str]
) -> None:
    _, fake, _ = served
    ws, name = repository
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": f"echo appended >> {name}"})]),
        Reply(content="Appended."),
    )
    page.click("[data-testid=changes-toggle]")  # open while the task runs: it follows
    page.wait_for_selector("[data-testid=changes-body] .empty-hint")
    send(page, "append to the notes")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    live = page.locator(f'[data-testid=changes-task] [data-path="{name}"] pre.diff')
    live.wait_for()
    assert "+appended" in hunks(live.text_content() or "")
    page.click("[data-testid=changes-toggle]")
    page.click("[data-testid=undo-task]")
    diff = page.locator(f'[data-testid=undo-diffs] [data-path="{name}"] pre.diff')
    diff.wait_for()
    assert "+appended" in hunks(diff.text_content() or "")
    page.click('[data-testid=undo-dialog] button:has-text("Undo")')
    page.wait_for_selector(".undo-button:has-text('Undone')", state="attached")
    wait_until(lambda: (ws / name).read_text() == LINES, 30, "the undo to put the file back")
