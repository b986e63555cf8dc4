"""The demo's empty screen offers only what the demo plays: in a real headless Chromium, the
welcome's examples are the demo's own suggestions (one home: demo/tasks.yaml), and each one sent
plays its own script to a complete end, with the tool calls that script opens with, not the
fallback that says what the demo can do."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from model.demo_scripts import DEMO_DIR, load_scripts
from tests.kit.browser import patience
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
FALLBACK_SAYS = "I'm the **demo model**"


@pytest.fixture
def demo_server(tmp_path: Path) -> Iterator[ServerProcess]:
    workspace = tmp_path / "ws"
    shutil.copytree(DEMO_DIR / "workspace", workspace)
    env = {"AGENT_PROVIDER": "demo", "AGENT_DEMO_PACE": "0", "AGENT_APPROVAL": "auto"}
    with ServerProcess(workspace, tmp_path / "data", base_url="", api_key="", env=env) as server:
        yield server


def test_every_welcome_example_is_a_demo_task_it_plays(demo_server: ServerProcess, page: Any):
    scripts = load_scripts()
    assert FALLBACK_SAYS in scripts.fallback.steps[0].say  # what a suggestion must not get
    page.goto(f"{demo_server.url}/?token={TOKEN}")
    page.wait_for_selector("[data-testid=demo-suggestion]")
    examples = page.locator(".welcome [data-testid=welcome-example]")
    page.wait_for_function(
        "n => document.querySelectorAll('.welcome [data-testid=welcome-example]').length === n",
        arg=len(scripts.suggestions),
    )
    assert examples.all_inner_texts() == scripts.suggestions
    assert scripts.suggestions, "the demo offers no task"

    for index, suggestion in enumerate(scripts.suggestions):
        script = scripts.pick(suggestion)
        promised = [call["tool"] for call in script.steps[0].calls]
        assert promised, f"{script.name} opens with no tool call"
        page.click("[data-testid=new-conversation]")
        page.locator(".welcome [data-testid=welcome-example]").nth(index).click()
        assert page.input_value("#message-input") == suggestion
        page.press("#message-input", "Enter")
        end = page.wait_for_selector(".task-end", timeout=patience(60))
        assert end is not None and end.get_attribute("data-reason") == "complete", suggestion
        tools = page.eval_on_selector_all(
            ".tool-card[data-tool]", "cards => cards.map(card => card.dataset.tool)"
        )
        assert tools[: len(promised)] == promised, (suggestion, tools)
        answer = page.locator(".assistant-message").last.inner_text()
        assert "I'm the demo model" not in answer and "lost track" not in answer, answer
    assert page.console_errors == []


def test_a_suggestion_that_would_play_another_script_is_a_start_up_error(tmp_path: Path):
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "fallback: help\n"
        "tasks:\n"
        "  - {name: tour, match: [workspace], steps: [{id: a, say: hi}]}\n"
        "  - {name: fix, suggestion: In this workspace fix it, match: [fix],\n"
        "     steps: [{id: a, say: ok}]}\n"
        "  - {name: help, steps: [{id: a, say: help}]}\n"
    )
    with pytest.raises(ValueError, match="fix: its suggestion plays another script"):
        load_scripts(tasks)
