"""Renaming a conversation in a real headless Chromium while the list is drawn again under it:
a task ending elsewhere must not take the title being typed away."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fake_llm import Reply
from tests.kit.browser import patience, send
from tests.kit.clients import connected
from tests.kit.settings import TOKEN

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.usefixtures("clean_fake")]


def test_a_rename_in_progress_outlives_the_list_being_drawn_again(served, page):
    server, fake, _ = served
    sockets: list[Any] = []
    page.on("websocket", lambda socket: sockets.append(socket))
    fake.script(Reply(content="Here are the notes."), Reply(content="Another answer."))
    page.goto(f"{server.url}/?token={TOKEN}")
    send(page, "show me the notes")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")

    row = page.locator(".conv-row").first
    row.hover()
    row.locator("[data-testid=rename-conversation]").click()
    page.fill("[data-testid=rename-input]", "Garden notes")

    def listed(payload: str | bytes) -> bool:  # a list_conversations answer naming it
        return isinstance(payload, str) and '"conversations":' in payload and "elsewhere" in payload

    with (
        sockets[-1].expect_event("framereceived", predicate=listed, timeout=patience(15)),
        connected(server.url) as client,  # another tab starts and ends a conversation
    ):
        client.wait_done(client.start("a question from elsewhere"))
    assert page.locator("[data-testid=rename-input]").count() == 1
    assert page.input_value("[data-testid=rename-input]") == "Garden notes"
    page.press("[data-testid=rename-input]", "Enter")
    page.wait_for_selector(".conv-title:text-is('Garden notes')")
    page.wait_for_selector(".conv-title:has-text('question from elsewhere')")
    assert page.console_errors == []
