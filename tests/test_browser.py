"""The page in a real headless Chromium against the real server and the fake model."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.web_helpers import TOKEN, ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

if CHROMIUM is None:
    pytest.skip("no Chromium on this machine (make test installs Debian's chromium where "
                "apt-get is allowed)", allow_module_level=True)

playwright = pytest.importorskip("playwright.sync_api")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerProcess, FakeLLM]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# demo\n")
    with FakeLLM("deepseek") as fake, ServerProcess(
        workspace, tmp_path / "data", base_url=fake.base_url, api_key=fake.api_key
    ) as server:
        yield server, fake


@pytest.fixture
def page(tmp_path: Path) -> Iterator[object]:
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.console_errors = []  # type: ignore[attr-defined]
        page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
        page.on("pageerror", lambda e: page.console_errors.append(str(e)))
        yield page
        browser.close()


def test_a_task_streams_into_the_page_and_stop_ends_a_slow_one(served, page):
    server, fake = served
    fake.script(
        Reply(reasoning="", tool_calls=[Call("create_file", {
            "path": "hello.py", "content": "print('hi')\n", "annotation": "greets"})]),
        Reply(content="Created **hello.py**:\n\n```python\nprint('hi')\n```\n", chunk_size=4),
        Reply(content="slow words " * 400, chunk_size=6, delay=0.03),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    assert "token=" not in page.url
    page.wait_for_selector('#file-tree [data-path="README.md"]')

    page.fill("#message-input", "make a hello script")
    page.press("#message-input", "Enter")
    page.wait_for_selector('.tool-card[data-state="ok"]')
    assert "create_file" in page.inner_text(".tool-card")
    page.wait_for_selector('#file-tree [data-path="hello.py"]')
    page.wait_for_selector(".assistant-message strong:has-text('hello.py')")
    page.locator(".assistant-message pre code", has_text="print('hi')").last.wait_for()
    page.wait_for_selector('.task-end[data-reason="complete"], #stop-button[hidden]',
                           state="attached")

    page.fill("#message-input", "now talk slowly")
    page.press("#message-input", "Enter")
    page.wait_for_selector(".assistant-message:last-of-type:has-text('slow words')")
    page.click("#stop-button")
    page.wait_for_selector('.task-end[data-reason="cancelled"]')
    answer = page.locator(".assistant-message").last.inner_text()
    assert answer.count("slow words") < 400

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "workspace.png"))
    assert page.console_errors == []  # type: ignore[attr-defined]


def test_reload_mid_task_shows_each_token_once_and_the_approval_still_waits(served, page):
    server, fake = served
    words = " ".join(f"w{n:03d}" for n in range(120))
    fake.script(
        Reply(content=words, chunk_size=5, delay=0.02,
              tool_calls=[Call("run_command", {"command": "echo approved-and-ran"})]),
        Reply(content="All done."),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    page.select_option("#approval-select", "ask")
    page.fill("#message-input", "count slowly, then run a command")
    page.press("#message-input", "Enter")
    page.wait_for_selector(".assistant-message:has-text('w010')")
    page.reload()
    page.wait_for_selector(".tool-card[data-state=approval] .tool-approval", timeout=20_000)
    answer = page.locator(".assistant-message").first.inner_text()
    assert answer.count("w000") == 1 and answer.count("w119") == 1
    assert " ".join(re.findall(r"\bw\d{3}\b", answer)) == words

    page.reload()
    page.wait_for_selector(".tool-card[data-state=approval] .tool-approval")
    assert page.locator(".tool-card").count() == 1
    page.click(".tool-card [data-testid=approve]")
    page.wait_for_selector('.task-end[data-reason="complete"]')
    assert "approved-and-ran" in page.inner_text(".tool-card")
    page.reload()
    page.wait_for_selector(".assistant-message:has-text('All done.')")
    text = page.inner_text("#conversation")
    assert text.count("w119") == 1 and text.count("All done.") == 1
    assert page.console_errors == []  # type: ignore[attr-defined]
