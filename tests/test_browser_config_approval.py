"""In a real headless Chromium, in auto mode: a change to Workspace Agent's own configuration
waits on its card with the reason shown, a command's after its output."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_llm import Call, Reply
from tests.kit.browser import Served, open_page, send

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(env={"AGENT_APPROVAL": "auto"}, files={"README.md": "# demo\n"}),
]
REASON = "which Workspace Agent reads as an agent definition or its prompt file"
MAKES_AGENT = "mkdir -p .agents/agents && echo 'name: y' > .agents/agents/y.yaml"


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    ready = [
        '#file-tree [data-path="README.md"]',
        "#status-bar [data-role=approval]:has-text('auto')",
    ]
    with open_page(browser, served, ready=ready, viewport={"width": 1400, "height": 1000}) as page:
        yield page


def test_the_card_says_why_a_configuration_change_waits_in_auto_mode(
    page: Any, served: Served
) -> None:
    _, fake, workspace = served
    fake.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": ".agents/agents/mine.yaml", "content": "name: x\n"})
            ]
        ),
        Reply(tool_calls=[Call("run_command", {"command": MAKES_AGENT})]),
        Reply(content="Neither was kept."),
    )
    send(page, "add two agents")
    approval = page.locator(".tool-card[data-tool=create_file] .tool-approval")
    warnings = approval.locator(".approval-warnings").inner_text()
    assert f"This change touches .agents/agents/mine.yaml, {REASON}" in warnings
    assert "always ask, even in auto mode" in warnings
    assert (
        approval.locator(".approval-preview")
        .inner_text()
        .startswith(f"This changes .agents/agents/mine.yaml, {REASON}")
    )
    page.click(".tool-card[data-tool=create_file] [data-testid=reject]")
    held = page.locator(".tool-card[data-tool=run_command] .tool-approval")
    assert f"This change touches .agents/agents/y.yaml, {REASON}" in (
        held.locator(".approval-warnings").inner_text()
    )
    assert "+name: y" in held.locator(".approval-preview").inner_text()
    page.click(".tool-card[data-tool=run_command] [data-testid=reject]")
    page.wait_for_selector(".task-end")
    assert not (workspace / ".agents/agents/mine.yaml").exists()
    assert not (workspace / ".agents").exists()
