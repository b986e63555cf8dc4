"""The page's editor in a real headless Chromium on the real server: open a file from the tree
or the preview, edit, Ctrl-S, the bytes on disk; a save beside the agent changing another file;
a change on disk while editing shows both versions and keeps the person's; a change while clean
reloads; binary and large files are read-only; the same on a phone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.workspace.editor_files import EDITOR_LIMIT_BYTES
from tests.fake_llm import Call, Reply
from tests.kit.browser import ARTIFACTS, Served, open_page, send
from tests.kit.waits import wait_until

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(
        env={"AGENT_APPROVAL": "auto"},
        files={
            "notes.md": "# Notes\n\nfirst line\n",
            "app.py": "def main():\n    return 1\n",
            "race.txt": "base\n",
            "live.txt": "before\n",
            "blob.bin": b"\x00\x01binary",
            "big.txt": "y" * (EDITOR_LIMIT_BYTES + 1),
            "mine.txt": "mine\n",
            ".mcp.json": '{"mcpServers": {}}\n',
        },
    ),
]
EDITOR = "#file-editor"
CONTENT = f"{EDITOR} .cm-content"
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    with open_page(browser, served, ready=['#file-tree [data-path="notes.md"]']) as page:
        yield page


def open_editor(page: Any, path: str) -> None:
    """Open `path` from the tree in the preview, then in the editor, as a person does."""
    page.click(f'#file-tree [data-path="{path}"]')
    page.click("[data-testid=preview-edit]")
    page.wait_for_selector(f'{EDITOR}:not([hidden]) [data-role=path]:text-is("{path}")')
    page.wait_for_selector(CONTENT)


def type_at_end(page: Any, text: str) -> None:
    page.click(CONTENT)
    page.keyboard.press("Control+End")
    page.keyboard.type(text)
    page.wait_for_selector(f'{EDITOR}[data-dirty="true"]')


def on_disk(path: Path, text: str) -> None:
    wait_until(lambda: path.read_text() == text, what=f"{path.name} to hold {text!r}")


def test_open_edit_and_ctrl_s_write_the_file(page: Any, served: Served) -> None:
    workspace = served[2]
    open_editor(page, "app.py")
    assert page.locator(f"{CONTENT} .tok-keyword, {CONTENT} [class*=ͼ]").count() > 0  # highlighted
    type_at_end(page, "print('hi')\n")
    page.keyboard.press("Control+s")
    page.wait_for_selector(f'{EDITOR}[data-dirty="false"]')
    on_disk(workspace / "app.py", "def main():\n    return 1\nprint('hi')\n")
    page.keyboard.press("Control+f")  # CodeMirror's search
    page.wait_for_selector(f"{EDITOR} .cm-search input[name=search]")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "editor.png"))


def test_a_save_while_the_agent_changes_another_file(page: Any, served: Served) -> None:
    _, fake, workspace = served
    open_editor(page, "notes.md")
    type_at_end(page, "mine\n")
    fake.script(
        Reply(tool_calls=[Call("create_file", {"path": "report.txt", "content": "agent\n"})]),
        Reply(content="Wrote report.txt."),
    )
    send(page, "write the report")
    page.wait_for_selector('#file-tree [data-path="report.txt"]')
    page.wait_for_selector(".task-end")
    assert page.get_attribute(EDITOR, "data-dirty") == "true"  # another file: nothing reloaded
    page.click("[data-testid=editor-save]")
    page.wait_for_selector(f'{EDITOR}[data-dirty="false"]')
    on_disk(workspace / "notes.md", "# Notes\n\nfirst line\nmine\n")
    assert (workspace / "report.txt").read_text() == "agent\n"


def test_a_change_on_disk_while_editing_keeps_both_versions(page: Any, served: Served) -> None:
    workspace = served[2]
    open_editor(page, "race.txt")
    type_at_end(page, "yours\n")
    (workspace / "race.txt").write_text("theirs\n")  # as the agent's write would
    page.wait_for_selector("[data-testid=editor-conflict]")
    theirs = page.inner_text("[data-testid=editor-conflict] .cm-merge-a .cm-content")
    mine = page.inner_text("[data-testid=editor-conflict] .cm-merge-b .cm-content")
    assert ("theirs" in theirs, "yours" in mine, "base" in mine) == (True, True, True)
    assert (workspace / "race.txt").read_text() == "theirs\n"  # nothing written yet
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "editor-conflict.png"))
    page.click("[data-testid=conflict-keep-mine]")
    page.wait_for_selector("[data-testid=editor-conflict]", state="detached")
    on_disk(workspace / "race.txt", "base\nyours\n")
    assert page.get_attribute(EDITOR, "data-dirty") == "false"


def test_a_save_that_finds_a_newer_file_can_take_theirs(page: Any, served: Served) -> None:
    workspace = served[2]
    open_editor(page, "mine.txt")
    type_at_end(page, "draft\n")
    version = page.get_attribute(EDITOR, "data-version")
    (workspace / "mine.txt").write_text("newer\n")
    # The save may go before the page hears of the change: a conflict either way.
    page.keyboard.press("Control+s")
    page.wait_for_selector("[data-testid=editor-conflict]")
    assert (workspace / "mine.txt").read_text() == "newer\n"
    page.click("[data-testid=conflict-take-theirs]")
    page.wait_for_selector(f'{EDITOR}[data-dirty="false"]')
    assert page.inner_text(CONTENT).strip() == "newer"
    assert page.get_attribute(EDITOR, "data-version") != version


def test_a_change_while_clean_reloads_live(page: Any, served: Served) -> None:
    workspace = served[2]
    open_editor(page, "live.txt")
    (workspace / "live.txt").write_text("after\n")
    page.wait_for_function(
        "sel => document.querySelector(sel).innerText.includes('after')", arg=CONTENT
    )
    assert page.get_attribute(EDITOR, "data-dirty") == "false"
    assert "Reloaded" in page.inner_text("[data-testid=editor-notice]")


def test_saving_the_agents_own_configuration_asks_first(page: Any, served: Served) -> None:
    workspace = served[2]
    open_editor(page, ".mcp.json")
    type_at_end(page, " ")
    page.keyboard.press("Control+s")
    dialog = page.locator("[data-testid=editor-config]")
    assert "MCP servers" in dialog.inner_text()
    dialog.locator("button:text-is('Cancel')").click()
    assert page.get_attribute(EDITOR, "data-dirty") == "true"
    assert (workspace / ".mcp.json").read_text() == '{"mcpServers": {}}\n'
    page.keyboard.press("Control+s")
    page.click("[data-testid=editor-config] button:text-is('Save')")
    page.wait_for_selector(f'{EDITOR}[data-dirty="false"]')
    on_disk(workspace / ".mcp.json", '{"mcpServers": {}}\n ')


@pytest.mark.parametrize(("path", "why"), [("blob.bin", "binary"), ("big.txt", "over 2 MB")])
def test_binary_and_large_files_open_read_only_saying_why(page: Any, path: str, why: str) -> None:
    open_editor(page, path)
    assert why in page.inner_text("[data-testid=editor-notice]")
    assert page.get_attribute(CONTENT, "contenteditable") == "false"
    assert page.locator("[data-testid=editor-save]").is_disabled()


def test_on_a_phone_the_editor_fills_the_screen_and_saves(browser: Any, served: Served) -> None:
    workspace = served[2]
    (workspace / "phone.txt").write_text("small\n")
    with open_page(
        browser, served, ready=["#sidebar-toggle"], viewport=PHONE, is_mobile=True, has_touch=True
    ) as page:
        page.click("#sidebar-toggle")
        page.click('#file-tree [data-path="phone.txt"]')
        page.click("[data-testid=preview-edit]")
        page.wait_for_selector(CONTENT)
        box = page.locator(EDITOR).bounding_box()
        assert box["width"] == pytest.approx(PHONE["width"], abs=1)
        type_at_end(page, "screen\n")
        page.click("[data-testid=editor-save]")
        on_disk(workspace / "phone.txt", "small\nscreen\n")


def test_undoing_the_task_keeps_the_users_save(page: Any, served: Served) -> None:
    _, fake, workspace = served
    fake.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "task/a.txt", "content": "agent\n"}),
                Call("create_file", {"path": "task/b.txt", "content": "agent\n"}),
            ]
        ),
        Reply(content="Wrote two files."),
    )
    send(page, "write two files")
    page.wait_for_selector("[data-testid=undo-task]:not([disabled])")
    page.click("#file-tree [data-path='task']")
    open_editor(page, "task/a.txt")
    type_at_end(page, "user\n")
    page.keyboard.press("Control+s")
    on_disk(workspace / "task/a.txt", "agent\nuser\n")
    page.click("[data-testid=undo-task]")
    conflicts = page.locator("[data-testid=undo-dialog] [data-testid=undo-conflicts]")
    assert "task/a.txt" in conflicts.inner_text() and "changed since" in conflicts.inner_text()
    page.click("[data-testid=undo-dialog] button:text-is('Undo the rest')")
    notice = page.locator("[data-testid=undo-notice]")
    notice.locator("text=task/b.txt").wait_for()
    assert "task/a.txt" in notice.inner_text()  # named as left alone
    assert not (workspace / "task/b.txt").exists()
    assert (workspace / "task/a.txt").read_text() == "agent\nuser\n"
