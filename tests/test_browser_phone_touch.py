"""The page on a phone (390 × 844, touch) in a real headless Chromium: a conversation is renamed
and deleted by taps alone, the status bar is one line with the rest a tap away, the approval
choice is read whole, and the chat gets most of the height."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_llm import Reply
from tests.kit.browser import ARTIFACTS, Served, open_page, send
from tests.test_browser_phone import PHONE, STATUS_OVERLAPS, assert_fits

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(env={"AGENT_APPROVAL": "ask"}, files={"README.md": "# demo\n"}),
]

# Whether each option's text fits in the select as drawn (its arrow takes about 20 px).
APPROVAL_FITS = """() => {
  const select = document.querySelector("#approval-select");
  const style = getComputedStyle(select);
  const context = document.createElement("canvas").getContext("2d");
  context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
  const room = select.clientWidth - padding - 20;
  const box = select.getBoundingClientRect();
  return {
    inside: box.left >= 0 && box.right <= document.documentElement.clientWidth,
    cut: [...select.options].map((o) => o.text)
      .filter((text) => context.measureText(text).width > room),
  };
}"""


@pytest.fixture
def phone(browser: Any, served: Served) -> Iterator[Any]:
    with open_page(
        browser, served, ready=["#status-bar"], viewport=PHONE, is_mobile=True, has_touch=True
    ) as page:
        yield page


def open_drawer(page: Any) -> None:
    page.locator("[data-testid=sidebar-toggle]").tap()
    page.wait_for_function(
        "() => document.querySelector('#sidebar').getBoundingClientRect().left >= 0"
    )


def test_a_conversation_is_renamed_and_deleted_with_taps_alone(phone: Any, served: Served) -> None:
    _, fake, _ = served
    fake.script(Reply(content="First answer."))
    send(phone, "a task to rename")
    phone.wait_for_selector(".assistant-message:has-text('First answer.')")
    open_drawer(phone)
    row = phone.locator(".conv-row", has_text="a task to rename")
    more = row.locator("[data-testid=conversation-menu]")
    assert more.is_visible(), "the row's actions need a pointer that hovers"
    box = more.bounding_box()
    assert box["width"] >= 36 and box["height"] >= 36, box
    assert not row.locator("[data-testid=rename-conversation]").is_visible()

    more.tap()
    row.locator("[data-testid=conversation-actions]").wait_for()
    assert more.get_attribute("aria-expanded") == "true"
    assert_fits(phone)
    ARTIFACTS.mkdir(exist_ok=True)
    phone.screenshot(path=str(ARTIFACTS / "phone-conversation-menu.png"))
    row.locator("[data-testid=menu-rename]").tap()
    rename = phone.locator("[data-testid=rename-input]")
    rename.fill("Renamed on a phone")
    rename.press("Enter")
    renamed = phone.locator(".conv-row", has_text="Renamed on a phone")
    renamed.wait_for()
    phone.wait_for_function(
        "() => document.querySelector('#conversation-title').textContent === 'Renamed on a phone'"
    )

    renamed.locator("[data-testid=conversation-menu]").tap()
    phone.locator("[data-testid=conversation-actions]").wait_for()
    phone.mouse.click(5, 5)  # a tap elsewhere closes the menu, nothing else happens
    phone.wait_for_selector("[data-testid=conversation-actions]", state="detached")
    renamed.locator("[data-testid=conversation-menu]").tap()
    renamed.locator("[data-testid=menu-delete]").tap()
    phone.locator("[data-testid=delete-dialog] button.btn-danger").tap()
    renamed.wait_for(state="detached")
    phone.locator("#conversation-list .empty-hint").wait_for()


def test_the_status_bar_is_one_line_and_more_shows_the_rest(phone: Any) -> None:
    bar = phone.locator("#status-bar")
    phone.wait_for_selector("#status-bar [data-role=model]:not(:empty)", state="attached")
    assert bar.bounding_box()["height"] <= 34, "the status bar takes more than one line"
    assert phone.locator("#status-bar [data-role=task]").is_visible()
    assert phone.locator("#context-meter").is_visible()
    assert not phone.locator("#status-bar [data-role=model]").is_visible()
    assert phone.evaluate(STATUS_OVERLAPS) == []
    chat = phone.locator("#chat-scroll").bounding_box()["height"]
    assert chat >= 600, f"the chat gets {chat} of {PHONE['height']} px"

    more = phone.locator("[data-testid=status-more]")
    more.tap()
    assert more.get_attribute("aria-expanded") == "true"
    for role in ("model", "mode", "approval", "agent", "sandbox"):
        assert phone.locator(f"#status-bar [data-role={role}]").is_visible(), role
    assert phone.locator("[data-testid=compact]").is_visible()
    assert phone.evaluate(STATUS_OVERLAPS) == []
    assert_fits(phone)
    more.tap()
    assert bar.bounding_box()["height"] <= 34


def test_the_approval_choice_is_read_whole(phone: Any) -> None:
    found = phone.evaluate(APPROVAL_FITS)
    assert found == {"inside": True, "cut": []}, found
    for value in ("auto", "ask", "read-only"):
        phone.select_option("#approval-select", value)
        assert phone.evaluate(APPROVAL_FITS)["inside"]
    assert_fits(phone)
