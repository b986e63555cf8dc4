"""A task a budget stopped, on the page in a real headless Chromium: its end line says which
budget and what was used, "Continue with a higher limit once" goes on with twice the limit for
that task only, and a reload draws the same end line from the history."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fake_llm import Call, Reply
from tests.kit.browser import Served, open_page, send

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(env={"AGENT_BUDGET_TASK": "1000 tokens"}, files={"a.txt": "alpha\n"}),
]
READ = Call("read_file", {"path": "a.txt"})
STOPPED = "Stopped: the task budget of 1,000 tokens is reached (1,400 tokens used)."


def test_continue_with_a_higher_limit_once(browser: Any, served: Served) -> None:
    _, fake, _ = served
    ready = ["#status-bar [data-role=connection][data-state=connected]"]
    with open_page(browser, served, ready=ready) as page:
        fake.script(
            Reply(tool_calls=[READ], usage=(600, 100)), Reply(tool_calls=[READ], usage=(600, 100))
        )
        send(page, "read a.txt until told")
        end = page.wait_for_selector('.task-end[data-reason="budget"]')
        assert end is not None and end.inner_text().startswith(STOPPED)
        raise_button = page.locator("[data-testid=continue-raised]")
        assert (
            raise_button.inner_text().strip() == "Continue with a higher limit once (2,000 tokens)"
        )
        asked = len(fake.chat_requests)
        fake.script(
            Reply(tool_calls=[READ], usage=(600, 100)),
            Reply(tool_calls=[READ], usage=(600, 100)),
            Reply(content="Read it, twice more.", usage=(600, 100)),
        )
        raise_button.click()
        page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
        assert len(fake.chat_requests) == asked + 3  # 1,400 tokens < 2,000: a third call
        assert page.locator("[data-testid=continue-raised]").count() == 0
        page.reload()
        page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
        assert page.locator('.task-end[data-reason="budget"]').inner_text().startswith(STOPPED)
