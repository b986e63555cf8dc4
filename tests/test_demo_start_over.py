"""The demo in a real headless Chromium and a real terminal: "Start over" on the banner (desktop
and a 390x844 touch screen, where the banner takes one line), and the pointers to the demo from
the page's no-key card and the CLI's no-key error."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from model.demo_scripts import DEMO_DIR
from tests.kit.browser import new_context
from tests.kit.demo import BUGGY
from tests.kit.server import ServerProcess, agent_argv
from tests.kit.settings import TOKEN
from tests.kit.tty import Tmux, clean_env, needs_tmux
from tests.kit.waits import SLOWNESS

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture
def demo_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    workspace = tmp_path / "ws"
    shutil.copytree(DEMO_DIR / "workspace", workspace)
    env = {"AGENT_PROVIDER": "demo", "AGENT_DEMO_PACE": "0.02", "AGENT_APPROVAL": "ask"}
    with ServerProcess(workspace, tmp_path / "data", base_url="", api_key="", env=env) as server:
        yield server, workspace


def test_start_over_stops_the_task_and_leaves_the_page_consistent(demo_server, page):
    server, workspace = demo_server
    page.goto(f"{server.url}/?token={TOKEN}")
    page.click("[data-testid=demo-suggestion]:has-text('Fix the bug in calc.py')")
    page.press("#message-input", "Enter")
    page.locator('.tool-card[data-tool="run_command"][data-state="approval"]').wait_for()
    (workspace / "scratch.txt").write_text("mine\n")
    page.locator('.tree-entry[data-path="scratch.txt"]').wait_for()
    page.locator(".conv-item").first.wait_for()  # the list follows the task's announcement
    assert page.locator(".conv-item").count() == 1

    page.click("[data-testid=demo-start-over]")
    dialog = page.locator("[data-testid=demo-reset-dialog]")
    dialog.wait_for()
    assert "every conversation of this demo is deleted" in dialog.inner_text()
    dialog.locator("button:text-is('Cancel')").click()
    dialog.wait_for(state="detached")
    assert (workspace / "scratch.txt").exists()  # nothing without a yes

    page.click("[data-testid=demo-start-over]")
    dialog.locator("button:text-is('Start over')").click()
    page.locator(".inline-notice:has-text('Started over')").wait_for()
    page.locator(".conv-item").first.wait_for(state="detached")
    page.locator('.tree-entry[data-path="scratch.txt"]').wait_for(state="detached")
    page.locator('.tree-entry[data-path="calc.py"]').wait_for()
    assert not (workspace / "scratch.txt").exists()
    assert BUGGY in (workspace / "calc.py").read_text()
    assert page.locator(".tool-card").count() == 0  # a new conversation, the old one gone
    assert page.console_errors == []

    page.click("[data-testid=demo-suggestion]:has-text('Fix the bug in calc.py')")
    page.press("#message-input", "Enter")  # the demo plays from the start again
    page.locator('.tool-card[data-tool="run_command"][data-state="approval"]').wait_for()


def test_on_a_phone_the_banner_is_one_line_and_start_over_is_tappable(demo_server, browser):
    server, _ = demo_server
    context = new_context(
        browser, viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True
    )
    try:
        page = context.new_page()
        page.goto(f"{server.url}/?token={TOKEN}")
        banner = page.locator("[data-testid=demo-banner]")
        button = page.locator("[data-testid=demo-start-over]")
        button.wait_for()
        box, tap = banner.bounding_box(), button.bounding_box()
        assert box is not None and tap is not None
        assert box["height"] <= 48, box  # one line (two took 64 px)
        assert tap["height"] >= 36 and tap["x"] + tap["width"] <= 390, tap
        assert tap["y"] >= box["y"] and tap["y"] + tap["height"] <= box["y"] + box["height"] + 1
        suggestions = page.locator("[data-testid=demo-suggestion]")
        assert suggestions.count() == 3
        first = suggestions.first.bounding_box()
        assert first is not None and abs(first["y"] - tap["y"]) < box["height"]  # the same line
        button.tap()
        page.locator("[data-testid=demo-reset-dialog]").wait_for()
    finally:
        context.close()


def test_the_no_key_card_points_to_the_demo(tmp_path: Path, page):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {"AGENT_PROVIDER": "deepseek"}
    with ServerProcess(workspace, tmp_path / "data", base_url="", api_key="", env=env) as server:
        page.goto(f"{server.url}/?token={TOKEN}")
        pointer = page.locator("[data-testid=setup-demo]")
        pointer.wait_for()
        assert "make demo" in pointer.inner_text() and "no key" in pointer.inner_text()


@needs_tmux()
def test_the_cli_without_a_key_points_to_the_demo(tmp_path: Path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = clean_env(AGENT_PROVIDER="deepseek")
    argv = agent_argv("cli", workspace, tmp_path / "data")
    with Tmux(argv, env=env, cwd=tmp_path) as tty:
        screen = tty.wait_for("make demo DEMO_FRONT=cli")
        assert "No API key for provider 'deepseek'" in screen
    once = subprocess.run(
        [*argv, "-p", "hello"], env=env, capture_output=True, text=True, timeout=60 * SLOWNESS
    )
    assert once.returncode == 2
    assert "error: No API key" in once.stderr and "make demo DEMO_FRONT=cli" in once.stderr
