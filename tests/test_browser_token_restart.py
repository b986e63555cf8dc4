"""A restart of the server, seen from an open tab in a real headless Chromium: with the token
kept in the data dir the tab reconnects and works on; when the server comes back with another
token the tab says so and what to open, with no Reconnect button that cannot help, and a reload
says how to get the address for `make run` and `python main.py web` alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import FakeLLM, Reply
from tests.kit.browser import collect_errors, new_context, send
from tests.kit.server import URL_LINE, ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

CONNECTION = "#status-bar [data-role=connection]"
BANNER = "#reconnect-banner"
# What a tab logs while its server is down or refuses it.
# A restart refuses the old server's connection (refused, then 401 and wrong token with another
# token); a long-poll of the old session that reaches the new server gets engine.io's 400 for
# an unknown session id; a WebSocket the stopping server closes while a frame is on its way is
# logged by Chromium as "Data frame received after close" (seen under load).
EXPECTED_ERRORS = (
    "ERR_CONNECTION_REFUSED",
    "401",
    "wrong token",
    "400 (BAD REQUEST)",
    "Data frame received after close",
)


def started(tmp_path: Path, fake: FakeLLM, token: str | None) -> ServerProcess:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    server = ServerProcess(
        workspace, tmp_path / "data", base_url=fake.base_url, api_key=fake.api_key
    )
    if token is None:
        del server.env["AGENT_WEB_TOKEN"]
    else:
        server.env["AGENT_WEB_TOKEN"] = token
    return server.start()


def printed_token(server: ServerProcess) -> str:
    return next(m["token"] for line in server.lines if (m := URL_LINE.search(line)))


def open_tab(browser: Any, server: ServerProcess) -> tuple[Any, list[str]]:
    page = new_context(browser).new_page()
    errors = collect_errors(page)
    page.goto(f"{server.url}/?token={printed_token(server)}")
    page.wait_for_selector(f"{CONNECTION}[data-state=connected]")
    return page, errors


def unexpected(errors: list[str]) -> list[str]:
    return [e for e in errors if not any(expected in e for expected in EXPECTED_ERRORS)]


def test_a_tab_works_on_after_a_restart_that_keeps_the_token(
    browser: Any, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    server = started(tmp_path, fake_llm, token=None)
    try:
        page, errors = open_tab(browser, server)
        fake_llm.script(Reply(content="Before the restart."))
        send(page, "first")
        page.wait_for_selector(".assistant-message:has-text('Before the restart.')")
        page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
        server.restart()
        page.wait_for_selector(f"{CONNECTION}[data-state=connected]")
        fake_llm.script(Reply(content="After the restart."))
        send(page, "second")
        page.wait_for_selector(".assistant-message:has-text('After the restart.')")
        page.reload()  # the cookie still holds the kept token
        page.wait_for_selector(".assistant-message:has-text('After the restart.')")
        assert unexpected(errors) == []
        page.context.close()
    finally:
        server.stop()


def test_a_tab_refused_by_a_restart_with_another_token_says_what_to_open(
    browser: Any, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    server = started(tmp_path, fake_llm, token="the-first-token-0123456789")
    try:
        page, errors = open_tab(browser, server)
        server.env["AGENT_WEB_TOKEN"] = "another-token-0123456789"
        server.restart()
        page.wait_for_selector(f'{BANNER}[data-reason="wrong_token"]')
        assert page.get_attribute(CONNECTION, "data-state") == "refused"
        text = page.locator(f"{BANNER} [data-role=text]").inner_text()
        assert "restarted with another access token" in text
        assert "make run" in text and "python main.py web" in text and "?token=" in text
        assert page.locator(f"{BANNER} [data-role=retry]").is_hidden()
        page.screenshot(path=str(tmp_path / "refused.png"))

        answer = page.reload()
        assert answer is not None and answer.status == 401
        body = page.locator("body").inner_text()
        assert "restarted with another one" in body
        assert "make run" in body and "python main.py web" in body
        assert unexpected(errors) == []
        page.context.close()
    finally:
        server.stop()
