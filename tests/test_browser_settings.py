"""The settings panel in a real Chromium (issue 37, point 7): on a server started without a key,
the no-key screen leads to the panel; a bad budget is refused at its setting and nothing is
saved; the key and the model saved there answer the next message without a reload or a
restart, the key written to a 0600 file and never shown again; a setting the environment fixes
is shown as fixed and cannot be changed."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import FakeLLM, Reply
from tests.kit.browser import Served, open_page, send
from tests.kit.server import ServerProcess, without_settings

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

OTHER_MODEL = "deepseek-v4-pro"
PANEL = "[data-testid=settings-panel][open]"


@pytest.fixture
def keyless(fake_llm: FakeLLM, tmp_path: Path) -> Iterator[Served]:
    """A server on the fake model whose environment gives the provider and URL, not the key
    nor the mode."""
    server = without_settings(ServerProcess.in_folder(tmp_path, fake_llm), "api_key", "mode")
    with server.start():
        yield server, fake_llm, server.workspace


def test_a_key_saved_in_the_panel_answers_the_next_message(browser: Any, keyless: Served) -> None:
    server, fake, _ = keyless
    with open_page(browser, keyless, ready=["[data-testid=setup-open-settings]"]) as page:
        page.click("[data-testid=setup-open-settings]")
        page.wait_for_selector(f"{PANEL} [data-testid=settings-api_key]")
        assert page.is_disabled("[data-testid=settings-provider]")
        source = page.inner_text("[data-testid=settings-provider-source]")
        assert "environment" in source and "AGENT_PROVIDER" in source
        assert page.inner_text("[data-testid=settings-key-state]") == "Not set"

        page.fill("[data-testid=settings-api_key]", fake.api_key)
        page.fill("[data-testid=settings-model]", OTHER_MODEL)
        page.fill("[data-testid=settings-budget_task]", "lots")
        page.click("[data-testid=settings-save]")
        error = page.wait_for_selector("[data-testid=settings-budget_task-error]:not([hidden])")
        assert "write a budget as tokens" in error.inner_text()
        assert "Not saved" in page.inner_text("[data-testid=settings-state]")
        assert not (server.data_dir / "settings.json").exists()

        page.fill("[data-testid=settings-budget_task]", "")
        page.click("[data-testid=settings-save]")
        page.wait_for_selector("[data-testid=settings-state].ok")
        assert page.input_value("[data-testid=settings-api_key]") == ""
        assert page.inner_text("[data-testid=settings-key-state]").startswith("Set · Saved here")
        assert page.input_value("[data-testid=settings-model]") == OTHER_MODEL
        page.click("[data-testid=settings-close]")
        page.wait_for_selector("#api-setup-panel", state="hidden")
        assert fake.api_key not in page.content()

        fake.script(Reply(content="Answered with the key from the panel."))
        send(page, "hello")
        page.wait_for_selector(
            ".assistant-message:has-text('Answered with the key from the panel.')"
        )
        page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    request = fake.chat_requests[-1]
    assert request.headers["authorization"] == f"Bearer {fake.api_key}"
    assert request.body["model"] == OTHER_MODEL
    path = server.data_dir / "settings.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"api_key": fake.api_key, "model": OTHER_MODEL}


def test_the_status_bar_opens_the_panel_and_a_saved_key_can_be_removed(
    browser: Any, keyless: Served
) -> None:
    server, fake, _ = keyless
    with open_page(browser, keyless, ready=["#status-bar [data-role=api]:not([hidden])"]) as page:
        page.click("#status-bar [data-role=api]")
        page.fill(f"{PANEL} [data-testid=settings-api_key]", fake.api_key)
        page.click("[data-testid=settings-save]")
        page.wait_for_selector("#status-bar [data-role=api]", state="hidden")
        page.click("[data-testid=settings-key-remove]")
        page.wait_for_selector("[data-testid=settings-key-state]:text-is('Not set')")
        page.click("[data-testid=settings-close]")
        page.wait_for_selector("#status-bar [data-role=api]:not([hidden])")
        page.wait_for_selector("#api-setup-panel:not([hidden])")
    assert json.loads((server.data_dir / "settings.json").read_text()) == {}


def test_a_default_mode_saved_in_the_panel_is_the_next_conversations(
    browser: Any, keyless: Served
) -> None:
    with open_page(
        browser, keyless, ready=["#status-bar [data-role=mode]:text-is('fast')"]
    ) as page:
        assert not page.is_checked("#mode-switch")
        page.click("[data-testid=settings-button]")
        page.select_option(f"{PANEL} [data-testid=settings-mode]", "thinking")
        page.click("[data-testid=settings-save]")
        page.wait_for_selector("[data-testid=settings-state].ok")
        assert page.inner_text("[data-testid=settings-mode-source]") == "Saved here"
        page.click("[data-testid=settings-close]")
        page.wait_for_selector("#status-bar [data-role=mode]:text-is('thinking')")
        page.wait_for_function("() => document.querySelector('#mode-switch').checked")
