"""What tasks cost, on the page in a real headless Chromium against the fake model priced by
AGENT_PRICES: the status bar's figure grows with each model call of the running task, the task's
end line shows its cost beside its tokens, and afterwards the bar shows the conversation's total
with today's in its tooltip; a reload draws the same end line from the history."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.browser import Served, open_page, send

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.server(files={"a.txt": "alpha\n"})]
READ = Call("read_file", {"path": "a.txt"})
SPEND = "[data-testid=status-spend]"


@pytest.fixture(scope="module")
def server_env(fake: FakeLLM) -> dict[str, str]:
    # 1,000 in + 100 out: $0.0120
    return {"AGENT_PRICES": json.dumps({fake.model: {"input": 10, "output": 20}})}


def test_live_task_cost_end_line_and_totals(browser: Any, served: Served) -> None:
    _, fake, _ = served
    ready = ["#status-bar [data-role=connection][data-state=connected]"]
    with open_page(browser, served, ready=ready) as page:
        fake.script(
            Reply(tool_calls=[READ], usage=(1000, 100)),
            Reply(tool_calls=[READ], usage=(1000, 100), latency=1.5),
            Reply(content="Read it twice.", usage=(1000, 100), latency=1.5),
        )
        send(page, "read a.txt twice")
        spend = page.locator(SPEND)
        page.wait_for_function(
            "s => document.querySelector(s)?.textContent.includes('1,000 in · 100 out · $0.0120')",
            arg=SPEND,
        )
        assert spend.locator("[data-role=spend-key]").inner_text() == "Task"
        page.wait_for_function(
            "s => document.querySelector(s)?.textContent.includes('2,000 in · 200 out · $0.0240')",
            arg=SPEND,
        )
        end = page.wait_for_selector('.task-end[data-reason="complete"]')
        assert end is not None
        assert end.query_selector(".task-usage").inner_text() == "3.0k in · 300 out"
        assert end.query_selector("[data-testid=task-cost]").inner_text() == "$0.0360"
        page.wait_for_function(
            "s => document.querySelector(s)?.textContent.startsWith('Conversation')", arg=SPEND
        )
        assert spend.locator("[data-role=spend]").inner_text() == "3,000 in · 300 out · $0.0360"
        title = spend.get_attribute("title") or ""
        assert "Today, every conversation: 3,000 in · 300 out · $0.0360" in title

        page.reload()
        page.wait_for_selector('.task-end[data-reason="complete"] [data-testid=task-cost]')
        assert page.locator("[data-testid=task-cost]").inner_text() == "$0.0360"
