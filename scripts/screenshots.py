"""Retake the README's screenshots from the demo: `.venv/bin/python scripts/screenshots.py`.

Starts the web server on the demo model and a copy of demo/workspace, drives headless
Chromium through the "fix the bug" task to its approval, and writes docs/screenshot.png
(desktop) and docs/screenshot-phone.png (390 px wide); then approves, lets the task end and
writes docs/screenshot-work.png: the task's changes and the person's own terminal beside it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

REPO = Path(__file__).resolve().parent.parent
TOKEN = "screenshot-token-0123456789abcdef"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(root: Path, port: int) -> subprocess.Popen[bytes]:
    shutil.copytree(REPO / "demo" / "workspace", root / "workspace")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env.update(
        AGENT_PROVIDER="demo", AGENT_WEB_TOKEN=TOKEN, AGENT_APPROVAL="ask", AGENT_MODE="thinking"
    )
    server = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "main.py"),
            "web",
            "--workspace",
            str(root / "workspace"),
            "--data-dir",
            str(root / "data"),
            "--port",
            str(port),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.2)
    server.kill()
    raise SystemExit("the demo server did not start")


def run_to_approval(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("#message-input")
    page.fill("#message-input", "Fix the bug in calc.py")
    page.keyboard.press("Enter")
    page.wait_for_selector(".approval-preview", timeout=60_000)
    time.sleep(0.5)  # let the last tokens and the card's clock settle


def work_beside_the_agent(page: Page) -> None:
    """Approve the waiting call, let the task end, open the Changes panel and a terminal."""
    deadline = time.monotonic() + 120
    while not page.locator(".task-end").count():  # each change the demo asks for, approved
        if time.monotonic() > deadline:
            raise SystemExit("the demo's task did not end")
        approve = page.locator("[data-testid=approve]:visible:enabled")
        if approve.count():
            approve.first.click()
        time.sleep(0.3)
    page.click("#changes-toggle")
    page.wait_for_selector("#changes-panel .diff, #changes-panel pre", timeout=30_000)
    page.click("#terminal-toggle")
    page.wait_for_selector("#terminal-panel .xterm-screen", timeout=30_000)
    page.locator("#terminal-panel .xterm-helper-textarea").first.focus()
    page.keyboard.type("python3 -m unittest test_calc 2>&1 | tail -3\n")
    rows = page.locator("#terminal-panel .xterm-rows").first
    deadline = time.monotonic() + 60
    while "OK" not in rows.inner_text():
        if time.monotonic() > deadline:
            raise SystemExit(f"the terminal's tests did not pass: {rows.inner_text()!r}")
        time.sleep(0.3)
    time.sleep(0.5)


def main() -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("needs Debian's chromium (make test installs it)")
    port = free_port()
    url = f"http://127.0.0.1:{port}/?token={TOKEN}"
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp), port)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                desktop = browser.new_page(viewport={"width": 1440, "height": 900})
                run_to_approval(desktop, url)
                desktop.screenshot(path=str(REPO / "docs" / "screenshot.png"))
                work_beside_the_agent(desktop)
                desktop.screenshot(path=str(REPO / "docs" / "screenshot-work.png"))
                phone = browser.new_page(
                    viewport={"width": 390, "height": 844},
                    device_scale_factor=2,
                    is_mobile=True,
                    has_touch=True,
                )
                run_to_approval(phone, url)
                phone.screenshot(path=str(REPO / "docs" / "screenshot-phone.png"))
                browser.close()
        finally:
            server.terminate()
            server.wait(10)
    print("wrote docs/screenshot.png, docs/screenshot-work.png and docs/screenshot-phone.png")


if __name__ == "__main__":
    main()
