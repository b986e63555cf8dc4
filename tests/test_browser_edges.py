"""The page's smaller edges a new user met (issue 37, point 8), in a real headless Chromium on
the real server: no "null" in the MCP panel, an open MCP server leaves the file tree its room,
a phone shows the tree's pin and download without hover, a stop is one calm line, a delegated
report shows once, an edit identical to the file says there was nothing to change, a preview
leaves the chat a readable width, the two Continues say how they differ, and a search that
hides the open conversation leaves its title in the header."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from history.store import ConversationStore
from tests.fake_llm import Call, Reply
from tests.kit.browser import Served, open_page, patience, pick_agent, send
from tests.kit.mcp_servers import stdio_entry
from tests.test_browser_phone import PHONE

FILES = {f"src/module_{n:02d}.py": f"VALUE = {n}\n" for n in range(30)}
FILES["notes.txt"] = "one\ntwo\n"
FILES[".mcp.json"] = json.dumps({"mcpServers": {"fixture": stdio_entry("edges")}})

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        env={"AGENT_MCP_TRUST_WORKSPACE": "true", "AGENT_BUDGET_TASK": "20000 tokens"},
        files=FILES,
    ),
]
CONNECTED = "#status-bar [data-role=connection][data-state=connected]"
SERVER_START = patience(45)  # the MCP fixture is a Python process importing the MCP SDK


def desktop(browser: Any, served: Served) -> contextlib.AbstractContextManager[Any]:
    return open_page(browser, served, ready=[CONNECTED], viewport={"width": 1440, "height": 900})


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    with desktop(browser, served) as page:
        yield page


def test_the_mcp_panel_says_no_null_and_an_open_server_leaves_the_tree_room(
    browser: Any, served: Served
) -> None:
    store = ConversationStore(served[2].parent / "data")  # the server lists what is on disk
    for n in range(25):
        store.create(title=f"Earlier conversation {n}")
    with desktop(browser, served) as page:  # opened after: not opened, then reloaded
        mcp_panel_and_tree(page)


def mcp_panel_and_tree(page: Any) -> None:
    server = page.locator('[data-testid=mcp-server][data-name="fixture"][data-state="connected"]')
    server.wait_for(timeout=SERVER_START)
    assert "null" not in page.locator("[data-testid=mcp-panel]").inner_text()
    page.wait_for_selector(".conv-item:has-text('Earlier conversation 24')")
    page.wait_for_selector('#file-tree [data-path="src"]')
    server.locator("summary").click()
    page.wait_for_selector('[data-name="fixture"] .mcp-tool >> nth=6')
    tree = page.locator("#file-tree").bounding_box()
    assert tree["height"] >= 10 * 26, f"the tree keeps {tree['height']:.0f} px: under ten rows"
    page.click('#file-tree [data-path="src"]')
    page.wait_for_selector('#file-tree [data-path="src/module_29.py"]')
    assert page.locator("#file-tree").bounding_box()["height"] >= 10 * 26
    servers = page.locator("[data-testid=mcp-panel] .mcp-servers")
    assert servers.evaluate("el => el.scrollHeight > el.clientHeight"), "the panel scrolls within"


def test_on_a_phone_the_trees_pin_and_download_show_without_hover(
    browser: Any, served: Served
) -> None:
    with open_page(
        browser, served, ready=[CONNECTED], viewport=PHONE, is_mobile=True, has_touch=True
    ) as phone:
        phone.locator("[data-testid=sidebar-toggle]").tap()
        item = '#file-tree .tree-item:has(> [data-path="notes.txt"])'
        phone.wait_for_selector(item)
        for part in ("pin-file", "download-entry"):
            target = phone.locator(f"{item} > [data-testid={part}]")
            assert target.evaluate("el => getComputedStyle(el).opacity") == "1", part
            box = target.bounding_box()
            assert box["width"] >= 28 and box["height"] >= 28, (part, box)
        phone.locator(f"{item} > [data-testid=pin-file]").tap()
        phone.wait_for_selector(f"{item} > [data-testid=pin-file][aria-pressed=true]")
        phone.locator(f"{item} > [data-testid=pin-file]").tap()  # the next tests: no focus
        phone.wait_for_selector(f"{item} > [data-testid=pin-file][aria-pressed=false]")


def test_a_stop_is_one_calm_line(page: Any, served: Served) -> None:
    _, fake, _ = served
    fake.script(Reply(tool_calls=[Call("run_command", {"command": "sleep 30"})]))
    send(page, "run something long, then stop it")
    page.wait_for_selector('.tool-card[data-tool="run_command"][data-state=running]')
    page.click("#stop-button")
    for when in ("live", "reloaded"):
        page.wait_for_selector('.task-end[data-reason="cancelled"] + [data-testid=task-followup]')
        conversation = page.locator("#conversation")
        assert conversation.locator(".inline-notice.error, [role=alert]").count() == 0, when
        assert conversation.locator(".tool-card[data-state=failed]").count() == 0, when
        card = conversation.locator('.tool-card[data-tool="run_command"]')
        assert card.get_attribute("data-state") == "stopped", when
        lines = conversation.locator(".inline-notice, .task-end-text").all_inner_texts()
        assert lines == ["Stopped."], (when, lines)
        if when == "live":
            page.reload()


def test_a_delegated_report_shows_once(page: Any, served: Served) -> None:
    _, fake, _ = served
    report = "## Report\n\nThe coder made report.txt with the line the user asked for."
    fake.script(
        Reply(tool_calls=[Call("delegate_to_coder", {"task": "make report.txt"})]),
        Reply(tool_calls=[Call("create_file", {"path": "report.txt", "content": "hi\n"})]),
        Reply(content=report),
        Reply(content=f"I handed this to the coder. Its report:\n\n{report}"),
    )
    pick_agent(page, "supervisor")
    send(page, "get report.txt made")
    page.wait_for_selector('.task-end[data-reason="complete"]')
    line = "The coder made report.txt"

    def shown() -> int:
        return int(page.locator("#conversation").inner_text().count(line))

    assert shown() == 1
    page.reload()
    page.wait_for_selector('.task-end[data-reason="complete"]')
    assert shown() == 1
    card = page.locator('.tool-card[data-tool="delegate_to_coder"]')
    card.locator(".tool-output > summary").click()  # the report itself is a click away
    assert shown() == 2


def test_an_edit_identical_to_the_file_says_there_was_nothing_to_change(
    page: Any, served: Served
) -> None:
    _, fake, _ = served
    same = Call("propose_edit", {"path": "notes.txt", "new_content": "one\ntwo\n"})
    fake.script(Reply(tool_calls=[same]), Reply(content="It already says that."))
    send(page, "propose notes.txt as it is")
    page.wait_for_selector('.task-end[data-reason="complete"]')
    for when in ("live", "reloaded"):
        card = page.locator('.tool-card[data-tool="propose_edit"]')
        assert card.get_attribute("data-state") == "unchanged", when
        assert card.locator(".tool-badge").inner_text() == "no change", when
        assert page.locator(".tool-card[data-state=failed]").count() == 0, when
        assert "already holds" in card.inner_text(), when
        if when == "live":
            page.reload()
            page.wait_for_selector('.task-end[data-reason="complete"]')


def test_a_preview_leaves_the_chat_a_readable_width(page: Any) -> None:
    page.wait_for_selector('#file-tree [data-path="notes.txt"]')
    page.click('#file-tree [data-path="notes.txt"]')
    page.wait_for_selector("[data-testid=file-preview]:not([hidden])")
    chat = page.locator("main.main").bounding_box()
    preview = page.locator("[data-testid=file-preview]").bounding_box()
    assert chat["width"] >= 640, f"the chat gets {chat['width']:.0f} px beside the preview"
    assert preview["width"] >= 320, f"the preview gets {preview['width']:.0f} px"
    assert chat["x"] + chat["width"] <= preview["x"] + 1, "the preview covers the chat"


def test_the_two_continues_after_a_budget_say_how_they_differ(page: Any, served: Served) -> None:
    _, fake, _ = served
    read = Call("read_file", {"path": "notes.txt"})
    fake.script(
        Reply(tool_calls=[read], usage=(12000, 100)), Reply(tool_calls=[read], usage=(12000, 100))
    )
    send(page, "read notes.txt until told")
    followup = page.locator("[data-testid=task-followup]")
    followup.locator("[data-testid=continue-raised]").wait_for()
    said = followup.locator("[data-testid=continue-meaning]").inner_text()
    assert "20,000 tokens" in said and "40,000 tokens" in said, said
    assert "this one task" in said, said


def test_a_search_that_hides_the_open_conversation_keeps_its_title(
    page: Any, served: Served
) -> None:
    _, fake, _ = served
    title = page.locator("#conversation-title")
    for topic in ("beavers", "otters"):
        page.click("#new-conversation")
        fake.script(Reply(content="Noted."))
        send(page, f"a talk about {topic}")
        page.wait_for_selector(f".conv-item[aria-current=true]:has-text('{topic}')")
        page.wait_for_function(
            f"() => document.querySelector('#conversation-title').textContent.includes('{topic}')"
        )
    named = title.inner_text()
    page.fill("#conversation-search", "beavers")  # shows another conversation, not the open one
    page.wait_for_selector("#conversation-list .conv-item:has-text('beavers')")
    page.wait_for_selector("#conversation-list .conv-item:has-text('otters')", state="detached")
    assert title.inner_text() == named
    page.fill("#conversation-search", "")
    page.wait_for_selector("#conversation-list .conv-item[aria-current=true]:has-text('otters')")
    assert title.inner_text() == named
