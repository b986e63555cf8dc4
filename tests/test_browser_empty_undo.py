"""No "Undo this task" for a task that left the workspace as it found it, in a real headless
Chromium: the Undo guessed at the task's end (a file was created) goes once the server says
the task changed nothing (it deleted the file again), without a reload."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fake_llm import Call, Reply
from tests.kit.browser import Served, open_page, send

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_a_task_that_changed_nothing_offers_no_undo(browser: Any, served: Served) -> None:
    _, fake, workspace = served
    ready = ["#status-bar [data-role=connection][data-state=connected]"]
    with open_page(browser, served, ready=ready) as page:
        fake.script(
            Reply(tool_calls=[Call("create_file", {"path": "scratch.txt", "content": "x"})]),
            Reply(tool_calls=[Call("delete_file", {"path": "scratch.txt"})]),
            Reply(content="Tidied up."),
        )
        send(page, "make and remove a scratch file")
        page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
        page.wait_for_selector("[data-testid=undo-task]", state="detached")
        fake.script(
            Reply(tool_calls=[Call("create_file", {"path": "kept.txt", "content": "y"})]),
            Reply(content="Kept."),
        )
        send(page, "make a file")
        page.wait_for_selector(".task-end >> nth=1", state="attached")
        page.wait_for_selector("[data-testid=undo-task]")
        assert page.locator("[data-testid=undo-task]").count() == 1
    assert (workspace / "kept.txt").exists() and not (workspace / "scratch.txt").exists()
