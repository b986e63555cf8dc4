"""The page losing its Socket.IO connection mid-answer, in a real headless Chromium: after the
reconnection the answer shows every token once, the running indicators go, and the page still
works, whether the streaming conversation is open or not (static/js/taskfeed.js's resync)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_llm import Reply
from tests.kit.browser import TOKEN, Served, open_page, send

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

CONNECTION = "#status-bar [data-role=connection]"
OFFLINE_MS = 400
# 200 words in 5-character chunks, one every 20 ms: a 4 s answer, still streaming when the
# page is back (Socket.IO's first reconnection attempts come 0.25 to 2.25 s after the drop).
WORDS = " ".join(f"w{n:03d}" for n in range(200))
# What a page that is offline logs about the requests it cannot make.
OFFLINE_ERROR = "net::ERR_INTERNET_DISCONNECTED"


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    ready = [f"{CONNECTION}[data-state=connected]"]
    with open_page(
        browser,
        served,
        ready=ready,
        tolerated=OFFLINE_ERROR,
        viewport={"width": 1300, "height": 900},
    ) as page:
        yield page


def slow_answer() -> Reply:
    return Reply(content=WORDS, chunk_size=5, delay=0.02)


def first_answer(page: Any) -> str:
    """The text of the first answer shown."""
    return page.locator(".assistant-message .answer").first.inner_text().strip()


def conversation_id(page: Any) -> str:
    page.wait_for_url(re.compile(r"#c=[^&]+$"))
    return page.url.split("#c=", 1)[1]


def running_dot(page: Any, cid: str) -> Any:
    return page.locator(f'.conv-item[data-conversation-id="{cid}"] .conv-running')


def drop_connection(page: Any, *, streaming_open: bool) -> None:
    """Take the tab offline for a moment: socket.io-client closes its transport on the
    browser's `offline` event and its reconnection attempts fail until the tab is back. An
    open streaming answer does not grow meanwhile: the events were missed."""
    page.context.set_offline(True)
    page.wait_for_selector(f"{CONNECTION}[data-state=reconnecting]")
    shown = first_answer(page) if streaming_open else None
    page.wait_for_timeout(OFFLINE_MS)
    if streaming_open:
        assert first_answer(page) == shown, "events reached the page while it was offline"
    page.context.set_offline(False)
    page.wait_for_selector(f"{CONNECTION}[data-state=connected]")


def check_done_and_still_working(page: Any, served: Served) -> None:
    """The open conversation's task ended, with nothing shown as running, and it answers a
    second message."""
    _, fake, _ = served
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    assert page.locator(".task-end").count() == 1
    assert first_answer(page) == WORDS
    assert page.locator("#stop-button").is_hidden()
    assert page.get_attribute("#conversation", "aria-busy") == "false"
    assert running_dot(page, conversation_id(page)).is_hidden()
    fake.script(Reply(content="Second answer."))
    send(page, "and now?")
    page.wait_for_selector(".assistant-message:has-text('Second answer.')")
    page.wait_for_selector(".task-end >> nth=1", state="attached")
    assert page.locator(".assistant-message .answer").count() == 2
    assert first_answer(page) == WORDS
    assert page.locator("#stop-button").is_hidden()


def test_a_drop_mid_answer_in_the_open_conversation_loses_and_repeats_nothing(
    page: Any, served: Served
) -> None:
    _, fake, _ = served
    fake.script(slow_answer())
    send(page, "count slowly")
    page.wait_for_selector(".assistant-message .answer:has-text('w010')")
    drop_connection(page, streaming_open=True)
    # Back while the answer still streams: what was missed is replayed, the rest comes live.
    assert page.locator("#stop-button").is_visible()
    assert WORDS.startswith(first_answer(page))
    check_done_and_still_working(page, served)


def test_a_drop_while_another_conversation_is_open_then_opening_the_streaming_one(
    page: Any, served: Served
) -> None:
    _, fake, _ = served
    fake.script(Reply(content="Hello there."))
    send(page, "say hello")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    other = conversation_id(page)
    page.click("#new-conversation")
    fake.script(slow_answer())
    send(page, "count slowly")
    page.wait_for_selector(".assistant-message .answer:has-text('w010')")
    streaming = conversation_id(page)
    page.click(f'.conv-item[data-conversation-id="{other}"]')
    page.wait_for_selector(".assistant-message:has-text('Hello there.')")
    running_dot(page, streaming).wait_for()

    drop_connection(page, streaming_open=False)
    assert running_dot(page, streaming).is_visible()
    # The background rejoin follows the task to its end without opening it.
    running_dot(page, streaming).wait_for(state="hidden")
    assert page.locator(".assistant-message").count() == 1

    page.click(f'.conv-item[data-conversation-id="{streaming}"]')
    page.wait_for_selector(".assistant-message .answer:has-text('w199')")
    check_done_and_still_working(page, served)


def test_a_request_left_unanswered_by_a_drop_or_a_silent_server_resolves_to_a_failure(
    page: Any,
) -> None:
    """Every request resolves to an ack, even one the connection drops or the server never answers:
    no request leaves a rejected promise nobody handles (the page logged "socket has been
    disconnected" for a request pending during a drop). A connection of its own, whose transport
    the test closes while a request waits."""
    page.evaluate(
        """async (token) => {
          const { Connection } = await import("/static/js/connection.js");
          window.probe = new Connection({ token, onEvent() {}, onState() {} });
          await new Promise((resolve) => window.probe.socket.once("connect", resolve));
        }""",
        TOKEN,
    )
    # An event no handler acks: the server stays silent.
    timed_out = page.evaluate('window.probe.request("no_such_request", {}, 300)')
    assert timed_out["ok"] is False and timed_out["error"]["code"] == "timeout", timed_out
    dropped = page.evaluate(
        """async () => {
          const pending = window.probe.request("no_such_request", {}, 60_000);
          window.probe.socket.io.engine.close();
          return await pending;
        }"""
    )
    assert dropped["ok"] is False and dropped["error"]["code"] == "disconnected", dropped
    page.evaluate("window.probe.socket.disconnect()")
