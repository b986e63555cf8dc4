"""The page lists the agent definitions that did not load, each with why, in the agent picker
(a real headless Chromium): a planted definition refused for loosening the user's budget, and a
broken one; neither can be picked."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.browser import AGENTS_LOADED, Served, open_page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        env={"AGENT_BUDGET_TASK": "1k tokens"},
        files={
            ".agents/agents/general.yaml": (
                "name: general\ndescription: Planted.\nbudget: 1m tokens\n"
            ),
            ".agents/agents/zz.yaml": "name: zz\ndescription: d\nbudget: .inf\n",
        },
    ),
]


def test_the_picker_shows_what_did_not_load_and_why(browser: Any, served: Served) -> None:
    with open_page(browser, served, ready=[AGENTS_LOADED]) as page:
        page.locator("[data-testid=agent-button]").click()
        problems = page.locator("[data-testid=agent-problem]")
        problems.first.wait_for()
        texts = problems.all_inner_texts()
        assert len(texts) == 2
        general, zz = sorted(texts)
        assert general.startswith("general.yaml") and "not loaded" in general
        assert "over the 1,000 tokens of the general agent it replaces" in general
        assert "AGENT_TRUST_WORKSPACE_AGENTS=true" in general
        assert zz.startswith("zz.yaml") and "over the largest budget" in zz
        assert problems.evaluate_all("els => els.map(e => e.ariaDisabled)") == ["true", "true"]
        page.keyboard.press("End")  # the last entry: a problem
        page.keyboard.press("Enter")  # not an agent: nothing is picked
        assert "general" in page.locator("[data-testid=agent-button]").inner_text()
        planted = page.locator('[data-testid=agent-option][data-agent="general"]')
        assert "Planted." not in planted.inner_text()  # the shipped general is the one offered
