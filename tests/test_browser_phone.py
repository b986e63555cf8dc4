"""The page on a phone-width screen (390 × 844) in a real headless Chromium: nothing scrolls
sideways, the sidebar is a drawer, the status bar wraps, an approval is read whole and answered."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_llm import Call, Reply
from tests.kit.browser import Served, open_page

PHONE = {"width": 390, "height": 844}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(env={"AGENT_APPROVAL": "ask"}, files={"README.md": "# demo\n"}),
]

# Elements sticking out of the viewport on the right, or wider than it, unless an ancestor that
# clips or scrolls them (a code block, say) itself fits. The drawer off screen is hidden.
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const offenders = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (!box.width || getComputedStyle(el).visibility === "hidden") continue;
    if (box.right <= width + 1 && box.width <= width + 1) continue;
    let clipped = false;
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      const fits = up.getBoundingClientRect().right <= width + 1;
      if (getComputedStyle(up).overflowX !== "visible" && fits) {
        clipped = true;
        break;
      }
    }
    if (!clipped) offenders.push(`${el.tagName}.${el.className} ${Math.round(box.right)}`);
  }
  const scroller = document.scrollingElement;
  return { scrollWidth: scroller.scrollWidth, clientWidth: scroller.clientWidth, offenders };
}"""

# Status bar items that overlap each other or stick out of the bar.
STATUS_OVERLAPS = """() => {
  const bar = document.querySelector("#status-bar").getBoundingClientRect();
  const items = [...document.querySelectorAll("#status-bar > *")]
    .filter((el) => el.getBoundingClientRect().width > 0)
    .map((el) => ({ name: el.textContent.trim().slice(0, 20), box: el.getBoundingClientRect() }));
  const problems = [];
  items.forEach((a, i) => {
    const out = a.box.left < bar.left - 1 || a.box.right > bar.right + 1;
    if (out || a.box.bottom > bar.bottom + 1) problems.push(`${a.name} outside`);
    items.slice(i + 1).forEach((b) => {
      const x = Math.min(a.box.right, b.box.right) - Math.max(a.box.left, b.box.left);
      const y = Math.min(a.box.bottom, b.box.bottom) - Math.max(a.box.top, b.box.top);
      if (x > 1 && y > 1) problems.push(`${a.name} over ${b.name}`);
    });
  });
  return problems;
}"""


@pytest.fixture
def phone(browser: Any, served: Served) -> Iterator[Any]:
    ready = ['#file-tree [data-path="README.md"]']  # attached: the tree is in the closed drawer
    with open_page(
        browser, served, ready=ready, viewport=PHONE, is_mobile=True, has_touch=True
    ) as page:
        yield page


def assert_fits(page: Any) -> None:
    found = page.evaluate(OVERFLOW)
    assert found["scrollWidth"] <= found["clientWidth"], found
    assert found["offenders"] == [], found["offenders"]
    assert page.evaluate(STATUS_OVERLAPS) == []


def test_the_sidebar_is_a_drawer_and_nothing_scrolls_sideways(phone: Any) -> None:
    assert_fits(phone)
    sidebar = phone.locator("#sidebar")
    assert not sidebar.is_visible()
    chat = phone.locator("#chat-scroll").bounding_box()
    assert chat["width"] >= PHONE["width"] - 2, "the chat does not get the whole width"
    composer = phone.locator(".composer-box").bounding_box()
    assert composer["width"] >= PHONE["width"] - 24

    phone.click("[data-testid=sidebar-toggle]")
    phone.wait_for_function(
        "() => document.querySelector('#sidebar').getBoundingClientRect().left >= 0"
    )
    assert phone.get_attribute("[data-testid=sidebar-toggle]", "aria-expanded") == "true"
    phone.locator('#file-tree [data-path="README.md"]').wait_for()
    phone.mouse.click(PHONE["width"] - 10, 400)  # outside the drawer: on the backdrop
    phone.wait_for_selector("#sidebar", state="hidden")
    phone.click("[data-testid=sidebar-toggle]")
    phone.wait_for_selector("#sidebar", state="visible")
    phone.keyboard.press("Escape")
    phone.wait_for_selector("#sidebar", state="hidden")
    assert phone.get_attribute("[data-testid=sidebar-toggle]", "aria-expanded") == "false"
    assert_fits(phone)


def test_an_approval_is_read_whole_and_answered_on_a_phone(phone: Any, served: Served) -> None:
    _, fake, _ = served
    command = (
        "python -m pip install --no-cache-dir --requirement requirements-development.txt "
        "&& python -m pytest --maxfail=1 tests/integration/test_everything_at_once.py"
    )
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": command, "timeout": 30})]),
        Reply(content="Done on a phone."),
    )
    phone.fill("#message-input", "install and test")
    phone.press("#message-input", "Enter")
    approval = phone.locator("[data-testid=approval]")
    approval.wait_for()
    assert_fits(phone)
    preview = approval.locator(".approval-preview")
    assert " ".join(preview.inner_text().split()) == command, "the command is cut or changed"
    assert preview.bounding_box()["width"] >= PHONE["width"] - 60
    title = approval.locator(".approval-title").bounding_box()
    assert title["height"] < 60, "the question wraps a word a line"
    for button in ("approve", "reject"):
        box = phone.locator(f"[data-testid={button}]").bounding_box()
        assert box["height"] >= 36 and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    phone.locator("[data-testid=approve]").tap()
    phone.wait_for_selector(".assistant-message:has-text('Done on a phone.')")
    phone.wait_for_selector(
        '.tool-card[data-tool=run_command][data-state="failed"], '
        '.tool-card[data-tool=run_command][data-state="ok"]'
    )
    assert_fits(phone)
