"""Small things of the page and of /debug in a real headless Chromium: the "Latest" pill shows only
when the newest part of the conversation is out of view, and an empty model stream on /debug says
what it would hold and why it holds nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_llm import Reply
from tests.kit.browser import Served, open_page, send
from tests.kit.settings import TOKEN

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

LONG_ANSWER = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(80))


@pytest.fixture
def desk(browser: Any, served: Served) -> Iterator[Any]:
    with open_page(
        browser, served, ready=["#status-bar"], viewport={"width": 1366, "height": 900}
    ) as page:
        yield page


def test_the_latest_pill_shows_only_when_the_newest_part_is_out_of_view(
    desk: Any, served: Served
) -> None:
    _, fake, _ = served
    pill = desk.locator("#jump-latest")
    assert pill.is_hidden()
    fake.script(Reply(content=LONG_ANSWER))
    send(desk, "write a long answer")
    desk.wait_for_selector(".assistant-message:has-text('Paragraph 79 of a long answer.')")
    desk.wait_for_selector("#stop-button", state="hidden")
    assert pill.is_hidden(), "the pill shows while the view is at the bottom"

    desk.locator("#chat-scroll").evaluate("(el) => { el.scrollTop = 0; }")
    pill.wait_for(state="visible")
    pill.click()
    pill.wait_for(state="hidden")
    desk.locator("#chat-scroll").evaluate("(el) => { el.scrollTop = 0; }")
    pill.wait_for(state="visible")

    desk.click("[data-testid=new-conversation]")  # an empty conversation has nothing out of view
    desk.wait_for_selector(".welcome")
    pill.wait_for(state="hidden")
    assert desk.evaluate("() => document.querySelector('#jump-latest').hidden")


def test_an_empty_model_stream_says_what_it_shows_and_why_it_is_empty(
    browser: Any, fresh_served: Served
) -> None:
    # a server of its own: no model call in its log, which the module's server has made
    server, _, _ = fresh_served
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/?token={TOKEN}")  # the cookie for /debug
    page.goto(f"{server.url}/debug")
    note = page.locator("[data-testid=stream-empty]")
    note.wait_for()
    text = note.inner_text()
    assert "No model deltas" in text and "raw delta the model API streams" in text, text
    assert "send a message" in text, text
    assert page.locator("[data-testid=stream-count]").inner_text() == "0 deltas"
    context.close()
