"""The processes panel and the app in a real headless Chromium, on the real server (the local
sandbox under bubblewrap) and the fake model, whose command starts tests/kit/web_app.py in the
background: the panel shows it with its port and its live output, the status bar counts it,
Open brings its page up in a new tab through the app proxy and the page's WebSocket echoes,
while the page's script reaches nothing of the workspace (its API with credentials, its
Socket.IO, its cookie); Stop ends the process and the route. On a desktop and on a phone."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.fake_llm import Call, Reply
from tests.kit import web_app
from tests.kit.browser import Served, open_page, send
from tests.kit.waits import wait_until

APP = Path(web_app.__file__).read_text()
PHONE = {"width": 390, "height": 844}
ROW = '[data-testid=process-list] [data-process="p1"]'

pytestmark = [
    pytest.mark.usefixtures("in_bubblewrap"),
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(env={"AGENT_SANDBOX": "local"}, files={"web_app.py": APP}),
]


def start_app(page: Any, served: Served) -> None:
    """The model starts the app in the background; its row shows with its port."""
    server, fake, _ = served
    command = f"python3 -u web_app.py 8000 {server.url}"
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": command, "background": True})]),
        Reply(content="The app runs."),
    )
    send(page, "start the app")
    page.wait_for_selector(
        f'{ROW}[data-state="running"] [data-role=ports]:text(":8000")', state="attached"
    )


def open_app(page: Any) -> Any:
    """Open p1's app from its row; the app's tab, its report once its script is done."""
    with page.context.expect_page() as opened:
        page.click(f"{ROW} [data-testid=process-open]")
    tab = opened.value
    tab.wait_for_url(re.compile(r"^http://127\.0\.0\.1:\d+/$"))
    tab.wait_for_function("document.getElementById('result')?.textContent.startsWith('{')")
    return tab


def report(tab: Any) -> dict[str, Any]:
    return dict(json.loads(tab.text_content("#result")))


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def stop(page: Any) -> None:
    page.click(f"{ROW} [data-testid=process-stop]")
    page.wait_for_selector(f'{ROW}[data-state="ended"] [data-role=state]:text("stopped")')


def test_the_panel_runs_the_app_in_its_own_origin(browser: Any, served: Served) -> None:
    ready = ["#reconnect-banner[data-state=connected]"]
    with open_page(browser, served, ready=ready, viewport={"width": 1400, "height": 900}) as page:
        start_app(page, served)
        assert page.text_content("[data-testid=status-processes]") == "1 process running"
        page.click(f"{ROW} [data-testid=process-output-toggle]")
        page.wait_for_selector(f'{ROW} [data-testid=process-output]:text("app listening on 8000")')

        tab = open_app(page)
        app_port = urlsplit(tab.url).port
        found = report(tab)
        assert found["echo"] == "echo: ping through the proxy", found
        assert found["cookie"] == "", "neither the workspace's cookie nor the app's is readable"
        for attempt in ("api", "upload", "polling"):
            assert str(found[attempt]).startswith("failed: TypeError"), found
        assert found["socket"].startswith("failed"), found
        assert not (served[2] / "from-app.txt").exists()
        output = page.locator(f"{ROW} [data-testid=process-output]")
        wait_until(lambda: "cookie: " in output.text_content(), 10, "the app's log of its requests")
        assert (
            "agent_token" not in output.text_content() and "agent_app_" not in output.text_content()
        )

        stop(page)
        assert page.is_hidden("[data-testid=status-processes]")
        wait_until(lambda: refused(app_port), 10, "the app's route to close")
        assert page.is_visible(f"{ROW} [data-testid=process-restart]")


def test_on_a_phone_the_count_opens_the_panel_and_the_app(browser: Any, served: Served) -> None:
    ready = ["#reconnect-banner[data-state=connected]"]
    with open_page(
        browser, served, ready=ready, viewport=PHONE, is_mobile=True, has_touch=True
    ) as page:
        start_app(page, served)
        assert (
            page.is_hidden("#processes-panel") or not page.locator("#processes-panel").is_visible()
        )
        page.tap("[data-testid=status-processes]")
        page.wait_for_selector(f"{ROW} [data-testid=process-open]", state="visible")
        width = page.evaluate("document.documentElement.clientWidth")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= width
        box = page.locator(f"{ROW} [data-testid=process-open]").bounding_box()
        assert box["x"] + box["width"] <= width and box["height"] >= 32, box

        tab = open_app(page)
        assert report(tab)["echo"] == "echo: ping through the proxy"
        stop(page)
