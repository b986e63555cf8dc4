"""The demo in a real headless Chromium: labelled as a demo, its tasks one click away, and the
fix played through approvals to "Undo this task"."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from model.demo_scripts import DEMO_DIR
from tests.kit.browser import patience
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture
def demo_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    workspace = tmp_path / "ws"
    shutil.copytree(DEMO_DIR / "workspace", workspace)
    env = {
        "AGENT_PROVIDER": "demo",
        "AGENT_DEMO_PACE": "0.05",
        "AGENT_APPROVAL": "ask",
        "AGENT_MODE": "thinking",
    }
    with ServerProcess(workspace, tmp_path / "data", base_url="", api_key="", env=env) as server:
        yield server, workspace


def test_the_page_says_demo_and_plays_the_fix_to_its_undo(demo_server, page):
    server, workspace = demo_server
    page.goto(f"{server.url}/?token={TOKEN}")
    banner = page.locator("[data-testid=demo-banner]")
    banner.wait_for()
    assert banner.locator("[data-testid=demo-badge]").inner_text().lower() == "demo"
    assert "no API key" in banner.inner_text()
    page.click("[data-testid=demo-suggestion]:has-text('Fix the bug in calc.py')")
    assert page.input_value("#message-input") == "Fix the bug in calc.py"
    page.press("#message-input", "Enter")

    page.wait_for_selector(
        ".thinking-block .thinking-text:has-text('reproduce the failure')", state="attached"
    )  # folded once the answer starts
    for tool in ("run_command", "modify_file", "run_command"):
        card = page.locator(f'.tool-card[data-tool="{tool}"][data-state="approval"]').last
        card.wait_for(timeout=patience(20))
        if tool == "modify_file":
            preview = card.locator(".approval-preview").inner_text()
            assert "-    return sum(values) / (len(values) - 1)" in preview
            assert "+    return sum(values) / len(values)" in preview
        card.locator("button:has-text('Approve')").click()
    page.wait_for_selector(".assistant-message h2:has-text('Fixed')", timeout=patience(20))
    assert "    return sum(values) / len(values)\n" in (workspace / "calc.py").read_text()

    page.click("[data-testid=undo-task]")
    page.click("[data-testid=undo-dialog] button:text-is('Undo')")
    page.wait_for_selector("[data-testid=undo-notice]:not([hidden])")
    assert "(len(values) - 1)" in (workspace / "calc.py").read_text()
    assert page.console_errors == []
