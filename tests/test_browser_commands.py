"""The command menu and the agent picker in a real headless Chromium: `/` lists what the page can
do, filtered as one types, by keyboard and mouse, each command doing what its button does; the
agents show their name, kind and description, by keyboard, on a desktop and on a phone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_llm import Call, Reply
from tests.kit.browser import AGENTS_LOADED, Served, chosen_agent, open_page

GREET = "---\nname: greet\ndescription: Greets the user.\n---\nSay hello like a friend.\n"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        env={"AGENT_APPROVAL": "auto"},
        files={"README.md": "# demo\n", ".agents/skills/greet/SKILL.md": GREET},
    ),
]
MENU = "[data-testid=command-menu]"
SHIPPED = ["coder", "data", "general", "research", "supervisor"]


@pytest.fixture
def desk(browser: Any, served: Served) -> Iterator[Any]:
    with open_page(browser, served, ready=[AGENTS_LOADED]) as page:
        yield page


def menu_names(page: Any) -> list[str]:
    return page.locator(f"{MENU} .command-option").evaluate_all(
        "els => els.map(e => e.dataset.name)"
    )


def disabled(page: Any) -> list[str]:
    options = page.locator(f'{MENU} .command-option[aria-disabled="true"]')
    return options.evaluate_all("els => els.map(e => e.dataset.name)")


def active(page: Any) -> str | None:
    selected = page.locator(f'{MENU} [aria-selected="true"]')
    return selected.get_attribute("data-name") if selected.count() else None


def test_slash_lists_the_commands_and_each_does_what_its_button_does(desk: Any, served: Served):
    _, fake, workspace = served
    page = desk
    page.click("#message-input")
    page.keyboard.type("/")
    page.wait_for_selector(MENU)
    assert menu_names(page) == ["skill", "agent", "compact", "undo", "memory", "new"]
    descriptions = page.locator(f"{MENU} .command-description").all_inner_texts()
    assert all(text.strip() for text in descriptions)
    assert disabled(page) == ["compact", "undo"]  # nothing to condense or undo yet
    assert "Open a conversation first" in page.inner_text(f'{MENU} [data-name="compact"]')
    page.keyboard.type("cond")  # found by what it does too
    assert menu_names(page) == ["compact"] and active(page) is None
    page.keyboard.press("Enter")  # nothing to pick: nothing is sent either
    assert page.locator(".user-message").count() == 0 and page.is_visible(MENU)
    for _ in "cond":
        page.keyboard.press("Backspace")

    page.keyboard.type("ag")
    page.keyboard.press("Enter")  # -> "/agent ", and the agents to pick from
    assert page.input_value("#message-input") == "/agent "
    page.wait_for_selector(f'{MENU} [data-name="supervisor"]')
    assert menu_names(page) == SHIPPED
    assert page.inner_text(f'{MENU} [data-name="supervisor"] .command-badge') == "delegates"
    page.keyboard.type("co")
    page.keyboard.press("Tab")
    assert page.input_value("#message-input") == "" and page.is_hidden(MENU)
    assert chosen_agent(page) == "coder"
    assert page.inner_text("[data-testid=status-agent]") == "coder"

    fake.script(
        Reply(tool_calls=[Call("create_file", {"path": "made.txt", "content": "new\n"})]),
        Reply(content="Made it."),
    )
    page.fill("#message-input", "/etc/hosts: what is it? make made.txt")  # a path, not a command
    page.press("#message-input", "Enter")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    assert page.inner_text(".user-message .bubble").startswith("/etc/hosts: what is it?")
    assert fake.chat_requests[-1].messages[1]["content"].startswith("/etc/hosts")
    page.wait_for_selector("[data-testid=undo-task]")
    assert (workspace / "made.txt").exists()

    page.fill("#message-input", "/u")
    page.wait_for_selector(f'{MENU} [data-name="undo"]:not([aria-disabled])')
    page.press("#message-input", "Enter")  # the task's own "Undo this task": it asks first
    page.click('[data-testid=undo-dialog] [data-value="undo"]')
    page.wait_for_selector("[data-testid=undo-notice]:has-text('made.txt')")
    assert not (workspace / "made.txt").exists()
    assert page.locator("[data-testid=undo-task]").is_disabled()

    page.fill("#message-input", "/me")
    page.wait_for_selector(f'{MENU} [data-name="memory"]')
    page.click(f'{MENU} [data-name="memory"]')  # by mouse
    page.wait_for_selector("[data-testid=memory-panel][open]")
    page.click("[data-testid=memory-close]")
    assert page.input_value("#message-input") == ""

    page.fill("#message-input", "/compact")
    page.wait_for_selector(f'{MENU} [data-name="compact"]:not([aria-disabled])')
    page.keyboard.press("Escape")  # closed, the text stays; Enter then runs it as typed
    assert page.is_hidden(MENU) and page.input_value("#message-input") == "/compact"
    page.press("#message-input", "Enter")  # the server's answer to the Compact button's request
    page.wait_for_selector(".inline-notice:has-text('Nothing to condense yet')")
    assert page.locator(".user-message").count() == 1  # no message was sent

    page.fill("#message-input", "/agent nosuch")
    page.press("#message-input", "Escape")
    page.press("#message-input", "Enter")
    assert "no agent “nosuch”" in page.inner_text("#composer-error")
    page.fill("#message-input", "/new")
    page.press("#message-input", "Enter")
    page.wait_for_function("() => !location.hash")
    assert page.inner_text("#conversation-title") == "New conversation"
    assert page.locator(".user-message").count() == 0


def test_skills_are_offered_after_slash_skill(desk: Any, served: Served):
    page = desk
    page.click("#message-input")
    page.keyboard.type("/s")
    page.wait_for_selector(f'{MENU} [data-name="skill"]')
    page.keyboard.press("Enter")
    page.wait_for_selector(f'{MENU} [data-name="greet"]')
    assert page.inner_text(f'{MENU} [data-name="greet"] .command-description') == (
        "Greets the user."
    )
    page.keyboard.type("gr")
    assert menu_names(page) == ["greet"]
    page.keyboard.press("Enter")
    assert page.input_value("#message-input") == "/skill greet "


def agent_list_fits(page: Any) -> dict[str, Any]:
    return page.evaluate(
        """() => {
          const list = document.querySelector('[data-testid=agent-list]').getBoundingClientRect();
          return {left: list.left, right: list.right, top: list.top,
                  width: document.documentElement.clientWidth};
        }"""
    )


@pytest.mark.parametrize(
    "viewport", [{"width": 1366, "height": 900}, {"width": 390, "height": 844}]
)
def test_the_agent_picker_shows_name_kind_and_description_by_keyboard(
    browser: Any, served: Served, viewport: dict[str, int]
):
    with open_page(browser, served, ready=[AGENTS_LOADED], viewport=viewport) as page:
        button = page.locator("[data-testid=agent-button]")
        assert button.is_visible() and "general" in button.inner_text()
        button.focus()
        page.keyboard.press("ArrowDown")
        agents = page.locator("[data-testid=agent-option]")
        agents.first.wait_for()
        assert agents.evaluate_all("els => els.map(e => e.dataset.agent)") == SHIPPED
        for option in agents.all():  # written out, not in a tooltip
            assert option.locator(".agent-kind").is_visible()
            assert len(option.locator(".agent-option-description").inner_text()) > 20
        supervisor = page.locator('[data-agent="supervisor"]')
        assert supervisor.locator(".agent-kind").inner_text() == "delegates"
        assert "Hands parts of the task to" in supervisor.inner_text()
        box = agent_list_fits(page)
        assert box["left"] >= 0 and box["right"] <= box["width"] and box["top"] >= 0, box
        assert page.evaluate("document.activeElement.id") == "agent-list"
        active = "document.querySelector('#agent-list .active').dataset.agent"
        assert page.evaluate(active) == "general"  # the chosen one first
        page.keyboard.press("End")
        page.keyboard.press("ArrowUp")
        assert page.evaluate(active) == "research"
        page.keyboard.press("Escape")  # nothing changes
        assert page.is_hidden("[data-testid=agent-list]") and chosen_agent(page) == "general"
        assert page.evaluate("document.activeElement.dataset.testid") == "agent-button"
        page.keyboard.press("Enter")  # the button opens it again
        page.keyboard.press("d")  # a letter jumps to a name
        page.keyboard.press("Enter")
        assert chosen_agent(page) == "data" and "data" in button.inner_text()
        assert page.is_hidden("[data-testid=agent-list]")
        assert page.inner_text("[data-testid=status-agent]") == "data"
        button.click()  # and by mouse (a finger)
        page.click('[data-agent="coder"]')
        assert chosen_agent(page) == "coder"
