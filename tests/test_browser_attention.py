"""When the agent needs the user, in a real headless Chromium: the tab title and desktop
notifications, messages queued while a task runs, Retry / Continue, and approval cards (shown
once, answered by key, rejected calls not failed, deletions described, "always" revocable)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply, long_answer
from tests.kit.browser import Served, open_page, send

KEY_GUARD_S = 0.45  # a card that just took the focus ignores keys this long

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(env={"AGENT_APPROVAL": "ask"}),
]

# A spy around the real Notification, and a tab the test can hide (headless tabs never are).
PAGE_SETUP = """
window.__notices = [];
const Real = window.Notification;
window.Notification = class extends Real {
  constructor(title, options) {
    super(title, options);
    window.__notices.push({ title, body: options?.body ?? "" });
  }
};
let hidden = false;
Object.defineProperty(document, "hidden", { get: () => hidden, configurable: true });
Object.defineProperty(document, "visibilityState", { get: () => (hidden ? "hidden" : "visible") });
window.__setHidden = (value) => {
  hidden = value;
  document.dispatchEvent(new Event("visibilitychange"));
};
"""


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    def setup(context: Any) -> None:
        context.grant_permissions(["notifications"], origin=served[0].url)
        context.add_init_script(PAGE_SETUP)

    ready = ["#status-bar [data-role=connection][data-state=connected]"]
    with open_page(
        browser, served, ready=ready, setup=setup, viewport={"width": 1300, "height": 900}
    ) as page:
        yield page


def user_texts(fake: FakeLLM) -> list[str]:
    return [m["content"] for m in fake.chat_requests[-1].messages if m.get("role") == "user"]


def test_title_and_notifications_say_when_the_agent_needs_you(page: Any, served: Served) -> None:
    _, fake, _ = served
    bell = page.locator("[data-testid=notify-toggle]")
    assert bell.get_attribute("aria-pressed") == "false"
    bell.click()
    page.wait_for_selector("[data-testid=notify-toggle][aria-pressed=true]")
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo from-a-hidden-tab"})]),
        Reply(content="Ran it."),
    )
    page.evaluate("() => window.__setHidden(true)")  # before the approval can come, however slow
    send(page, "run it while I look away")
    page.wait_for_function("() => document.title.startsWith('(!) Approval needed · ')")
    notices = page.evaluate("() => window.__notices")
    assert notices == [{"title": "Approval needed", "body": "run_command: echo from-a-hidden-tab"}]
    page.wait_for_function("() => document.activeElement?.dataset.testid === 'approval'")
    page.wait_for_timeout(KEY_GUARD_S * 1000)
    page.keyboard.press("Enter")
    page.wait_for_selector(".assistant-message:has-text('Ran it.')")
    page.wait_for_function("() => document.title.startsWith('✓ Done · ')")
    assert page.evaluate("() => window.__notices.at(-1).title") == "The task is done."
    assert page.locator(".tool-card[data-tool=run_command]").get_attribute("data-state") == "ok"
    page.evaluate("() => window.__setHidden(false)")
    page.wait_for_function(
        "() => document.title.endsWith('Workspace Agent') && !/^(\\(!\\)|✓)/.test(document.title)"
    )
    assert len(page.evaluate("() => window.__notices")) == 2
    bell.click()  # off again: nothing more is shown
    assert bell.get_attribute("aria-pressed") == "false"


def test_messages_typed_while_a_task_runs_are_queued(page: Any, served: Served) -> None:
    _, fake, _ = served
    fake.script(Reply(content="slow " * 80, chunk_size=5, delay=0.03), Reply(content="Second."))
    send(page, "first")
    page.wait_for_selector(".assistant-message:has-text('slow')")
    page.fill("#message-input", "second")
    assert page.inner_text("#send-button").strip() == "Queue"
    page.press("#message-input", "Enter")
    send(page, "third")
    queued = page.locator("[data-testid=queued-message]")
    assert queued.count() == 2
    assert "sent when the agent finishes" in queued.first.inner_text()
    queued.nth(1).locator("[data-testid=cancel-queued]").click()
    assert queued.count() == 1
    assert page.input_value("#message-input") == "third"  # a cancelled message is not lost
    page.fill("#message-input", "")
    page.wait_for_selector(".assistant-message:has-text('Second.')")
    assert user_texts(fake) == ["first", "second"]
    assert queued.count() == 0
    assert page.locator("#composer-error").is_hidden()


def test_retry_and_continue_after_a_stop(page: Any, served: Served) -> None:
    _, fake, _ = served
    fake.script(
        Reply(content=long_answer("word", 400), chunk_size=5, delay=0.02), Reply(content="Went on.")
    )
    send(page, "a long story")
    page.wait_for_selector(".assistant-message:has-text('word')")
    page.click("#stop-button")
    page.wait_for_selector('.task-end[data-reason="cancelled"] + [data-testid=task-followup]')
    page.reload()  # the offer is made from the stored end of the task too
    page.wait_for_selector('.task-end[data-reason="cancelled"] + [data-testid=task-followup]')
    page.click("[data-testid=continue]")
    page.wait_for_selector(".assistant-message:has-text('Went on.')")
    assert user_texts(fake) == ["a long story", "continue"]
    assert page.locator("[data-testid=task-followup]").count() == 0

    fake.script(
        Reply(content=long_answer("more", 400), chunk_size=5, delay=0.02), Reply(content="Again.")
    )
    send(page, "another one")
    page.wait_for_selector(".assistant-message:has-text('more')")
    page.click("#stop-button")
    page.click("[data-testid=retry]")
    page.wait_for_selector(".assistant-message:has-text('Again.')")
    assert user_texts(fake) == ["a long story", "continue", "another one"]
    assistant = [
        m.get("content") or ""
        for m in fake.chat_requests[-1].messages
        if m.get("role") == "assistant"
    ]
    assert not any("more" in text for text in assistant), "the stopped attempt is still there"
    versions = page.locator(".user-message").last.locator(".branch-count")
    versions.wait_for()  # the retried message has two versions now
    assert versions.inner_text().replace(" ", "") == "2/2"


def test_approval_cards(page: Any, served: Served) -> None:
    _, fake, workspace = served
    (workspace / "notes.txt").write_text("".join(f"note {n}\n" for n in range(1, 31)))
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo only-once"})]),
        Reply(tool_calls=[Call("delete_file", {"path": "notes.txt"})]),
        Reply(content="Left both alone."),
    )
    send(page, "clean up")
    card = page.locator(".tool-card[data-tool=run_command]")
    page.wait_for_function("() => document.activeElement?.dataset.testid === 'approval'")
    assert card.inner_text().count("echo only-once") == 2  # the head's summary, and the preview
    assert card.locator(".tool-body").inner_text().count("echo only-once") == 1
    page.wait_for_timeout(KEY_GUARD_S * 1000)
    page.keyboard.press("n")
    delete = page.locator(".tool-card[data-tool=delete_file] [data-testid=approval]")
    shown = delete.locator(".approval-preview").inner_text()
    assert shown.startswith("Delete notes.txt: 231 bytes, 30 lines. The first 20:\nnote 1\n")
    assert "… 10 more lines" in shown
    page.wait_for_timeout(KEY_GUARD_S * 1000)
    page.keyboard.press("Escape")  # answers the card; it does not stop the task
    page.wait_for_selector(".assistant-message:has-text('Left both alone.')")
    for name in ("run_command", "delete_file"):
        rejected = page.locator(f".tool-card[data-tool={name}]")
        assert rejected.get_attribute("data-state") == "rejected"
        assert rejected.locator(".tool-badge").inner_text() == "rejected"
    assert page.locator('.tool-card[data-state="failed"]').count() == 0
    assert (workspace / "notes.txt").exists()
    style = page.locator(".tool-duration").first.evaluate(
        "(el) => [getComputedStyle(el).whiteSpace, getComputedStyle(el).fontVariantNumeric]"
    )
    assert style == ["nowrap", "tabular-nums"]

    fake.script(Reply(tool_calls=[Call("run_command", {"command": "echo a"})]), Reply(content="A."))
    send(page, "run a")
    page.check("[data-testid=approve-always]")
    page.click("[data-testid=approve]")
    allowed = page.locator("[data-testid=always-allowed]")
    allowed.wait_for()
    assert allowed.inner_text() == "1 always allowed"
    page.wait_for_selector(".assistant-message:has-text('A.')")
    allowed.click()
    popover = page.locator("[data-testid=allowed-popover]")
    assert "run_command" in popover.inner_text()
    popover.locator("[data-testid=revoke][data-tool=run_command]").click()
    allowed.wait_for(state="hidden")
    fake.script(Reply(tool_calls=[Call("run_command", {"command": "echo b"})]), Reply(content="B."))
    send(page, "run b")
    page.locator(".tool-card[data-state=approval] [data-testid=approve]").click()  # asked again
    page.wait_for_selector(".assistant-message:has-text('B.')")
