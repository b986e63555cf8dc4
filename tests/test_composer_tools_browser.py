"""The small daily tools in a real headless Chromium on the real server: `@` in the message box
completes a workspace path and puts the file in focus, Copy puts an answer's Markdown source in
the clipboard, and Regenerate sends the last message again as a second branch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_llm import Reply
from tests.kit.browser import Served, open_page, send

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(
        env={"AGENT_APPROVAL": "auto"},
        files={"docs/notes.md": "# Notes\n", "src/app.py": "print(1)\n", "README.md": "# hi\n"},
    ),
]
ANSWER = "# Result\n\n**Bold** text, `code` and a list:\n\n- one\n- two\n"


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    with open_page(
        browser,
        served,
        ready=['#file-tree [data-path="README.md"]'],
        permissions=["clipboard-read", "clipboard-write"],
    ) as page:
        yield page


def test_at_completes_a_workspace_path_and_focuses_it(page: Any, served: Served) -> None:
    _, fake, _ = served
    page.click("#message-input")
    page.keyboard.type("look at @note")
    page.wait_for_selector('[data-testid=path-menu] [data-path="docs/notes.md"]')
    assert page.locator("[data-testid=path-menu] li").count() == 1  # only what holds "note"
    page.keyboard.press("Enter")  # picks; sends nothing
    page.wait_for_selector("[data-testid=path-menu]", state="hidden")
    assert page.input_value("#message-input") == "look at @docs/notes.md "
    page.wait_for_selector('[data-testid=status-focus] [title="docs/notes.md"]')
    fake.script(Reply(content="Seen."))
    page.keyboard.press("Enter")
    page.wait_for_selector('.task-end[data-reason="complete"]')
    system = fake.chat_requests[-1].messages[0]["content"]
    assert "# Notes" in system  # the focused file went to the model with the message


def test_copy_puts_the_answers_markdown_in_the_clipboard(page: Any, served: Served) -> None:
    _, fake, _ = served
    fake.script(Reply(content=ANSWER))
    send(page, "write something")
    page.wait_for_selector('.task-end[data-reason="complete"]')
    page.click(".assistant-message [data-testid=copy-answer]")
    page.wait_for_selector('.assistant-message [data-testid=copy-answer]:text-is("Copied")')
    assert page.evaluate("navigator.clipboard.readText()") == ANSWER


def test_regenerate_gives_a_second_answer_on_a_new_branch(page: Any, served: Served) -> None:
    _, fake, _ = served
    fake.script(Reply(content="First answer."))
    send(page, "answer me")
    page.wait_for_selector('.task-end[data-reason="complete"]')
    page.wait_for_selector("[data-testid=regenerate-answer]:visible")
    fake.script(Reply(content="Second answer."))
    page.click("[data-testid=regenerate-answer]")
    page.wait_for_selector('.assistant-message:has-text("Second answer.")')
    page.wait_for_selector('.user-message .branch-count:text-is("2/2")')
    assert fake.chat_requests[-1].last_user_text == "answer me"
    assert page.locator('.assistant-message:has-text("First answer.")').count() == 0
    page.click('.user-message [aria-label="Previous branch"]')
    page.wait_for_selector('.assistant-message:has-text("First answer.")')
