"""A new user's first hour in a real headless Chromium: a status bar that tells the truth,
conversations to rename, search and delete, undo that says what it does, what survives a
reload, and the workspace panel (focus pins, memory, .gitignore, wrapped lines)."""

from __future__ import annotations

import pytest

from tests.fake_llm import Call, Reply, long_answer
from tests.kit.browser import AGENTS_LOADED, ARTIFACTS, send
from tests.kit.settings import TOKEN
from tests.kit.waits import wait_until

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(files={"README.md": "# demo\n"}),
]
# One server for the module: each test works in a conversation of its own (a page opened
# without one starts a new one) on files of its own names.

# Every text the task label of the status bar showed, recorded in the page.
RECORD_LABELS = """() => {
  window.taskLabels = [];
  const label = document.querySelector('#status-bar [data-role=task] .label');
  new MutationObserver(() => window.taskLabels.push(label.textContent))
    .observe(label, {childList: true, characterData: true, subtree: true});
}"""


def status(tab, role: str) -> str:
    return tab.inner_text(f"#status-bar [data-role={role}]")


def test_the_status_bar_tells_the_truth_and_what_a_task_kept_survives_reload(served, page):
    server, fake, _ = served
    fake.script(
        Reply(
            reasoning="let me see " * 30,
            chunk_size=4,
            delay=0.01,
            content="Thought it through.",
            usage=(3000, 200),
        ),
        Reply(content="fast words " * 30, chunk_size=6, delay=0.01, usage=(3300, 100)),
        Reply(content=long_answer("slow words", 400), chunk_size=6, delay=0.03),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_selector(AGENTS_LOADED, state="attached")
    assert (status(page, "mode"), status(page, "approval")) == ("fast", "auto")
    page.click(".mode-toggle")
    page.select_option("#approval-select", "ask")
    wait_until(  # the status bar follows the controls' change events
        lambda: (status(page, "mode"), status(page, "approval")) == ("thinking", "ask"),
        10,
        "the status bar to show thinking and ask",
    )

    page.evaluate(RECORD_LABELS)
    send(page, "think first")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    assert "Thinking · step 1" in page.evaluate("window.taskLabels")
    page.reload()  # the conversation keeps its mode and approval, its tokens and its context
    page.wait_for_selector(".task-end .task-usage")
    assert (status(page, "mode"), status(page, "approval")) == ("thinking", "ask")
    assert page.inner_text(".task-end .task-usage") == "3.0k in · 200 out"
    assert page.inner_text("#context-meter .meter-text").startswith("3.2k / ")

    page.click(".mode-toggle")  # fast: the model is waited for, never "thinking"
    assert status(page, "mode") == "fast"
    page.evaluate(RECORD_LABELS)
    send(page, "now quickly")
    page.wait_for_selector(".task-end:nth-of-type(2), .task-end >> nth=1", state="attached")
    labels = page.evaluate("window.taskLabels")
    assert "Writing · step 1" in labels and not any(x.startswith("Thinking") for x in labels)

    send(page, "talk slowly")
    page.wait_for_selector(".assistant-message:has-text('slow words')")
    page.click("#stop-button")
    page.wait_for_selector('.task-end[data-reason="cancelled"]')
    page.reload()
    page.wait_for_selector('.task-end[data-reason="cancelled"]')
    assert "Stopped." in page.inner_text('.task-end[data-reason="cancelled"]')
    # what streamed before the stop is counted, estimated (no usage came for it)
    stopped = page.inner_text('.task-end[data-reason="cancelled"] .task-usage')
    assert page.locator(".task-end .task-usage").count() == 3 and stopped.startswith("~"), stopped
    assert status(page, "mode") == "fast"
    assert page.console_errors == []


def test_conversations_are_renamed_searched_deleted_and_run_in_every_tab(served, page):
    server, fake, _ = served
    fake.script(
        Reply(content="Hello! I can help you tidy the notes folder. Where do we start?"),
        # 160 words, never a run said again (a reply repeating itself is a loop: core/repeats.py)
        Reply(content=" ".join(f"lexer tale {n}" for n in range(55)), chunk_size=6, delay=0.02),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    send(page, "hi")
    first = page.locator(".conv-title", has_text="I can help you tidy the notes folder")
    first.wait_for()
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")

    other = page.context.new_page()
    other.goto(f"{server.url}/?token={TOKEN}")
    other.wait_for_selector(".conv-item")
    page.click("#new-conversation")
    send(page, "Please write a long story about parsers")
    story = ".conv-item:has-text('Write a long story about parsers')"
    other.wait_for_selector(f"{story} .conv-running:visible")
    other.click(story)  # a new tab sees it running
    other.wait_for_selector("#status-bar [data-role=task][data-state=streaming]")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    other.wait_for_selector(".conv-item:has-text('parsers') .conv-running", state="hidden")

    page.bring_to_front()  # a tab in the background gets few animation frames: slow to act on
    row = page.locator(".conv-row", has=page.locator(".conv-title", has_text="tidy the notes"))
    row.hover()
    row.locator("[data-testid=rename-conversation]").click()
    page.fill("[data-testid=rename-input]", "Notes cleanup")
    page.press("[data-testid=rename-input]", "Enter")
    other.wait_for_selector(".conv-title:text-is('Notes cleanup')")  # renamed in every tab

    page.fill("#conversation-search", "lexer tale")
    page.wait_for_selector(".conv-snippet:has-text('lexer tale')")
    assert page.locator(".conv-item").count() == 1
    page.fill("#conversation-search", "cleanup")
    page.wait_for_selector(".conv-item .conv-title mark:text-is('cleanup')")  # the hit, marked
    assert page.locator(".conv-item").count() == 1
    assert page.inner_text(".conv-item .conv-title") == "Notes cleanup"
    page.fill("#conversation-search", "")
    page.wait_for_selector(".conv-item >> nth=1")

    other.click(".conv-item:has-text('Notes cleanup')")
    other.wait_for_selector(".assistant-message:has-text('tidy the notes')")
    listed = other.locator(".conv-item").count()  # the module's other tests' conversations too
    page.bring_to_front()
    row = page.locator(".conv-row", has=page.locator(".conv-title", has_text="Notes cleanup"))
    row.hover()
    row.locator("[data-testid=delete-conversation]").click()
    page.click("[data-testid=delete-dialog] button:text-is('Cancel')")
    assert page.locator(".conv-item:has-text('Notes cleanup')").count() == 1
    row.hover()
    row.locator("[data-testid=delete-conversation]").click()
    assert "undo history" in page.inner_text("[data-testid=delete-dialog]")
    page.click("[data-testid=delete-dialog] button:text-is('Delete')")
    page.wait_for_selector(".conv-item:has-text('Notes cleanup')", state="detached")
    other.wait_for_selector(".inline-notice:has-text('This conversation was deleted.')")
    assert other.locator(".conv-item").count() == listed - 1
    assert page.console_errors == []


def test_a_message_sent_before_the_server_said_its_defaults_runs_with_them(served, page):
    """The approval control starts at the page's placeholder ("ask") and takes the server's
    default (here "auto") when get_status answers: a message sent before that answer carries no
    approval, so the server's default applies, not the placeholder."""
    server, fake, workspace = served
    fake.script(
        Reply(tool_calls=[Call("create_file", {"path": "early.txt", "content": "x"})]),
        Reply(content="Made it."),
    )
    held = []

    def hold_get_status_answers(route):
        if route.request.method != "GET":
            return route.continue_()
        try:
            response = route.fetch()
            if '"provider"' in response.text():
                held.append((route, response))
            else:
                route.fulfill(response=response)
        except Exception:  # the page went meanwhile (a failed test's teardown): nothing to do
            if not page.is_closed():
                raise

    page.route_web_socket("**/socket.io/**", lambda socket: socket.close())  # polling only
    page.route("**/socket.io/?*transport=polling*", hold_get_status_answers)
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_function("() => document.querySelector('#approval-select').value === 'ask'")
    send(page, "make a file")
    page.wait_for_selector(".user-message:has-text('make a file')")
    assert held, "get_status was answered before the message was sent"
    assert status(page, "approval") != "auto"
    for route, response in held:
        route.fulfill(response=response)
    page.unroute_all(behavior="wait")  # the rest as without the test's hands in it
    page.wait_for_selector('.task-end[data-reason="complete"]')
    assert (workspace / "early.txt").read_text() == "x"  # created, never asked
    assert status(page, "approval") == "auto"
    assert page.console_errors == []


def test_undo_lists_what_it_will_do_and_editing_offers_it(served, page):
    server, fake, _ = served
    fake.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "new.txt", "content": "made"}),
                Call(
                    "modify_file", {"path": "README.md", "operation": "append", "content": "more"}
                ),
            ]
        ),
        Reply(content="Changed two files."),
        Reply(tool_calls=[Call("run_command", {"command": "echo nothing changes"})]),
        Reply(content="Ran it."),
        Reply(tool_calls=[Call("create_file", {"path": "other.txt", "content": "x"})]),
        Reply(content="Made other.txt."),
        Reply(content="A new branch."),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    send(page, "change things")
    page.wait_for_selector("[data-testid=undo-task]")
    page.click("[data-testid=undo-task]")
    dialog = page.locator("[data-testid=undo-dialog]")
    assert dialog.locator('li[data-action="remove"]').inner_text().startswith("new.txt")
    assert "will be removed" in dialog.locator('li[data-action="remove"]').inner_text()
    assert "will be restored" in dialog.locator('li:has-text("README.md")').inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "undo-dialog.png"))
    dialog.locator("button:text-is('Cancel')").click()
    assert page.locator("#file-tree [data-path='new.txt']").count() == 1
    page.click("[data-testid=undo-task]")
    page.click("[data-testid=undo-dialog] button:text-is('Undo')")
    notice = page.locator("[data-testid=undo-notice]")
    notice.locator("text=Removed").wait_for()
    assert "new.txt" in notice.inner_text() and "Restored: README.md" in notice.inner_text()
    page.wait_for_selector("#file-tree [data-path='new.txt']", state="detached")

    send(page, "run a command")  # it changes no file: no Undo for it
    page.wait_for_selector(".assistant-message:has-text('Ran it.')")
    page.wait_for_timeout(300)  # not a wait: the time a wrong Undo would have to show up
    assert page.locator("[data-testid=undo-task]").count() == 1  # the first task's, undone

    send(page, "make other")
    page.wait_for_selector(".assistant-message:has-text('Made other.txt.')")
    page.wait_for_selector("[data-testid=undo-task]:not([disabled])")
    page.locator(".user-message").nth(1).hover()  # branch from before the last two tasks
    page.locator(".user-message").nth(1).locator(".edit-button").click()
    page.fill(".edit-input", "something else")
    page.click(".edit-send")
    branch = page.locator("[data-testid=branch-undo-dialog]")
    assert "other.txt" in branch.inner_text() and "will be removed" in branch.inner_text()
    branch.locator("button:text-is('Keep the files')").click()
    page.wait_for_selector("[data-testid=other-branch-notice]:has-text('other.txt')")
    page.wait_for_selector(".assistant-message:has-text('A new branch.')")
    assert (server.workspace / "other.txt").exists()
    assert page.console_errors == []


def test_undo_shows_a_file_changed_since_the_task_and_overwrites_it_only_when_asked(served, page):
    server, fake, _ = served
    shared = server.workspace / "shared.txt"
    shared.write_text("before\n")
    fake.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "shared.txt", "content": "the task's\n"}),
                Call("create_file", {"path": "notes.txt", "content": "made"}),
            ]
        ),
        Reply(content="Changed two files."),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    send(page, "change things")
    page.wait_for_selector("[data-testid=undo-task]")
    shared.write_text("the user's own work\n")  # after the task, before its undo
    page.click("[data-testid=undo-task]")
    dialog = page.locator("[data-testid=undo-dialog]")
    conflict = dialog.locator("[data-testid=undo-conflicts] li")
    assert conflict.inner_text().startswith("shared.txt")
    assert "changed since the task" in conflict.inner_text()
    assert "will be removed" in dialog.locator('li:has-text("notes.txt")').inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "undo-conflict-dialog.png"))
    dialog.locator("button:text-is('Undo the rest')").click()
    notice = page.locator("[data-testid=undo-notice]")
    notice.locator("[data-testid=undo-kept]:has-text('shared.txt')").wait_for()
    assert "Removed: notes.txt" in notice.inner_text()
    assert shared.read_text() == "the user's own work\n"
    page.wait_for_selector("[data-testid=undo-task]:not([disabled])")  # what it left, on request

    page.click("[data-testid=undo-task]")
    dialog.locator("[data-testid=undo-conflicts] li:has-text('shared.txt')").wait_for()
    dialog.locator("button:text-is('Overwrite them')").click()
    notice.locator("text=Restored: shared.txt").wait_for()
    assert shared.read_text() == "before\n"
    assert page.locator("[data-testid=undo-task]").is_disabled()
    assert page.console_errors == []


def test_the_branch_dialog_leaves_a_file_changed_since_its_task(served, page):
    server, fake, _ = served
    fake.script(
        Reply(content="Hello."),
        Reply(tool_calls=[Call("create_file", {"path": "later.txt", "content": "x"})]),
        Reply(content="Made later.txt."),
        Reply(content="A new branch."),
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    send(page, "hi")
    page.wait_for_selector(".assistant-message:has-text('Hello.')")
    send(page, "make later")
    page.wait_for_selector(".assistant-message:has-text('Made later.txt.')")
    (server.workspace / "later.txt").write_text("the user's, later\n")
    page.locator(".user-message").nth(1).hover()  # branch from before that task
    page.locator(".user-message").nth(1).locator(".edit-button").click()
    page.fill(".edit-input", "something else")
    page.click(".edit-send")
    branch = page.locator("[data-testid=branch-undo-dialog]")
    assert "changed since the task" in branch.locator("[data-testid=undo-conflicts]").inner_text()
    branch.locator("button:text-is('Undo them, then send')").click()
    page.wait_for_selector("[data-testid=other-branch-notice]:has-text('later.txt')")
    page.wait_for_selector(".assistant-message:has-text('A new branch.')")
    assert (server.workspace / "later.txt").read_text() == "the user's, later\n"
    assert page.console_errors == []


def test_the_workspace_panel_pins_files_edits_memory_and_hides_ignored_ones(served, page):
    server, fake, _ = served
    (server.workspace / ".gitignore").write_text("build/\n*.log\n")
    (server.workspace / "build").mkdir()
    (server.workspace / "build" / "out.txt").write_text("built")
    (server.workspace / "debug.log").write_text("noise")
    (server.workspace / "wide.py").write_text("x = '" + "long " * 400 + "'\nprint(x)\n")
    fake.script(Reply(tool_calls=[Call("list_files", {})]), Reply(content="Listed."))
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_selector('#file-tree [data-path="wide.py"]')
    hidden = '#file-tree [data-path="build"], #file-tree [data-path="debug.log"]'
    assert page.locator(hidden).count() == 0

    page.click('#file-tree [data-path="wide.py"]')
    body = page.locator("#file-preview [data-role=body]")
    body.locator(".code-line >> nth=1").wait_for()
    assert body.evaluate("el => el.scrollWidth <= el.clientWidth + 1")  # the long line wraps
    assert body.locator(".code-line .ln").nth(1).inner_text() == "2"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "wrapped-preview.png"))
    page.click("#file-preview [data-role=close]")

    page.hover('#file-tree .tree-item:has([data-path="wide.py"])')
    page.click('#file-tree .tree-item:has([data-path="wide.py"]) [data-testid=pin-file]')
    page.wait_for_selector("[data-testid=status-focus] .focus-chip:has-text('wide.py')")
    before = len(fake.chat_requests)  # the module's other tests' requests
    send(page, "list the files")
    page.wait_for_selector(".assistant-message:has-text('Listed.')")
    first, second = fake.chat_requests[before:]
    listing = next(m["content"] for m in second.messages if m["role"] == "tool")
    assert "wide.py" in listing and "debug.log" not in listing and "build" not in listing
    assert "long long" in first.messages[0]["content"]  # the pinned file went
    page.reload()
    page.wait_for_selector("[data-testid=status-focus] .focus-chip:has-text('wide.py')")
    page.click("[data-testid=status-focus] .focus-remove")
    page.wait_for_selector("[data-testid=status-focus] .focus-chip", state="detached")
    assert (
        page.get_attribute(
            '#file-tree .tree-item:has([data-path="wide.py"]) .tree-pin', "aria-pressed"
        )
        == "false"
    )

    page.click("[data-testid=memory-button]")
    panel = page.locator("[data-testid=memory-panel]")
    panel.locator("[data-testid=memory-main]:not([disabled])").wait_for()
    panel.locator("[data-testid=memory-main]").fill("The user prefers tabs.")
    panel.locator("[data-testid=memory-main-save]").click()
    panel.locator("[data-testid=memory-main-state]:text-is('Saved')").wait_for()
    panel.locator("[data-testid=memory-task]").fill("x" * 20_001)
    panel.locator("[data-testid=memory-task-save]").click()
    panel.locator("[data-testid=memory-task-state]:has-text('the limit is 20,000')").wait_for()
    page.screenshot(path=str(ARTIFACTS / "memory-panel.png"))
    panel.locator("[data-testid=memory-close]").click()
    page.click("[data-testid=memory-button]")
    panel.locator("[data-testid=memory-main]:not([disabled])").wait_for()
    assert panel.locator("[data-testid=memory-main]").input_value() == "The user prefers tabs.\n"
    assert (server.data_dir / "memory" / "main.md").read_text() == "The user prefers tabs.\n"
    assert page.console_errors == []
