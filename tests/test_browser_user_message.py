"""Every view of a conversation shows the message that starts each task, in a real headless
Chromium on the real server: a prompt sent in one tab appears in another, once, above its
answer (the sender's own once too); one a client program sends appears in the page; a reload
while the task runs shows it once; a branch shows in its place."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fake_llm import Reply
from tests.kit.browser import AGENTS_LOADED, Served, collect_errors, new_context, send
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until
from workspace_client import Client

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(files={"README.md": "# demo\n"}),
]

# The conversation as shown, top to bottom: ("you", text) per message, ("agent", text) per answer.
IDS = "() => [...document.querySelectorAll('.user-message')].map((el) => el.dataset.messageId)"
SHOWN = """() => [...document.querySelectorAll('.user-message .bubble, .assistant-message .answer')]
  .map((el) => [el.classList.contains('bubble') ? 'you' : 'agent', el.innerText.trim()])"""


def shown(page: Any) -> list[tuple[str, str]]:
    return [tuple(item) for item in page.evaluate(SHOWN)]


def open_conversation(page: Any, server: ServerProcess, cid: str) -> None:
    page.goto(f"{server.url}/?token={TOKEN}#c={cid}")
    page.wait_for_selector(AGENTS_LOADED, state="attached")


def conversation_of(page: Any) -> str:
    """The open conversation's id, from the page's address."""
    wait_until(lambda: "#c=" in page.url, 10, "the page to name its conversation")
    return str(page.url.split("#c=")[1])


def test_a_prompt_sent_in_one_tab_shows_in_the_other_once_above_its_answer(
    served: Served, page: Any, browser: Any
):
    server, fake, _ = served
    fake.script(
        Reply(content="First answer."),
        Reply(content="Second answer, streamed slowly. " * 4, chunk_size=4, delay=0.05),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    send(page, "first from the sender")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    cid = conversation_of(page)

    other_context = new_context(browser, viewport={"width": 1400, "height": 900})
    try:
        other = other_context.new_page()
        errors = collect_errors(other)
        open_conversation(other, server, cid)
        other.wait_for_selector(".assistant-message:has-text('First answer.')")
        send(page, "second from the sender")
        # The other tab shows the prompt as the task starts.
        other.wait_for_selector(".user-message:has-text('second from the sender')")
        other.wait_for_selector('.task-end[data-reason="complete"] >> nth=1', state="attached")
        page.wait_for_selector('.task-end[data-reason="complete"] >> nth=1', state="attached")
        second = "Second answer, streamed slowly. " * 4
        expected = [
            ("you", "first from the sender"),
            ("agent", "First answer."),
            ("you", "second from the sender"),
            ("agent", second.strip()),
        ]
        assert shown(other) == expected
        assert shown(page) == expected  # the sender's own tab: once, not again from the event
        assert other.evaluate(IDS) == page.evaluate(IDS)
        assert errors == []
    finally:
        other_context.close()
    assert page.console_errors == []


def test_a_prompt_a_client_program_sends_shows_in_the_page_and_a_reload_shows_it_once(
    served: Served, page: Any
):
    server, fake, _ = served
    fake.script(
        Reply(content="Answered in the page."),
        Reply(content="Answered for the program.", chunk_size=3, stall_after=2, stall=3),
        Reply(content="The edited branch."),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    send(page, "from the page")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    cid = conversation_of(page)
    with Client(server.url, TOKEN) as program:
        program.send("from a program", cid)
        page.wait_for_selector(".user-message:has-text('from a program')")
        assert shown(page)[2] == ("you", "from a program")  # above its answer
        page.reload()  # while the task runs: the record and the replayed event are one message
        page.wait_for_selector('.task-end[data-reason="complete"] >> nth=1', state="attached")
        assert shown(page) == [
            ("you", "from the page"),
            ("agent", "Answered in the page."),
            ("you", "from a program"),
            ("agent", "Answered for the program."),
        ]
        # A branch: the first message edited elsewhere shows in place of the first one.
        program.send("from the page, edited", cid, parent_id=None)
        page.wait_for_selector(".assistant-message:has-text('The edited branch.')")
        assert shown(page) == [("you", "from the page, edited"), ("agent", "The edited branch.")]
        page.wait_for_selector(".user-message .branch-count:has-text('2/2')")
    assert page.console_errors == []
