"""Safe execution in a real headless Chromium: approvals, reviewed edits, undo, stop, sandbox."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.browser import ARTIFACTS, Served, open_page, send
from tests.kit.clients import connected
from tests.kit.server import serving

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(env={"AGENT_APPROVAL": "ask"}, files={"README.md": "# demo\n"}),
]


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    ready = [
        '#file-tree [data-path="README.md"]',
        "#status-bar [data-role=approval]:has-text('ask')",
    ]
    with open_page(browser, served, ready=ready, viewport={"width": 1400, "height": 1000}) as page:
        yield page


def wait_tasks_ended(page: Any, count: int) -> None:
    page.wait_for_function("n => document.querySelectorAll('.task-end').length >= n", arg=count)


def test_approve_runs_the_command_and_its_clock_ticks(page: Any, served: Served) -> None:
    _, fake, workspace = served
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "sleep 1; echo hi > made.txt"})]),
        Reply(content="Made it."),
    )
    send(page, "make a file with a command")
    approval = page.locator(".tool-card[data-state=approval] .tool-approval")
    assert "echo hi > made.txt" in approval.inner_text()
    page.click("[data-testid=approve]")
    running = ".tool-card.timing .tool-duration"  # the card of a call under way
    clock = page.locator(running)
    first = clock.inner_text()
    page.wait_for_function(
        "([running, first]) => document.querySelector(running)?.innerText !== first",
        arg=[running, first],
    )
    assert clock.inner_text() != first, "the elapsed time does not tick"
    page.wait_for_selector('#file-tree [data-path="made.txt"]')
    wait_tasks_ended(page, 1)
    card = page.locator(".tool-card[data-tool=run_command]")
    assert card.get_attribute("data-state") == "ok"
    assert "timing" not in (card.get_attribute("class") or "")
    assert card.locator(".tool-duration").inner_text().endswith("s")
    assert (workspace / "made.txt").read_text() == "hi\n"
    page.wait_for_selector("[data-testid=undo-task]")


def test_reject_reaches_the_model(page: Any, served: Served) -> None:
    _, fake, workspace = served
    fake.script(
        Reply(tool_calls=[Call("delete_file", {"path": "README.md"})]),
        Reply(content="All right, I left it."),
    )
    send(page, "delete the readme")
    page.click("[data-testid=reject]")
    page.wait_for_selector(".approval-decision.rejected")
    wait_tasks_ended(page, 1)
    tool_messages = [m for m in fake.chat_requests[-1].messages if m.get("role") == "tool"]
    assert "declined" in tool_messages[-1]["content"]
    assert (workspace / "README.md").exists()
    assert page.locator("[data-testid=undo-task]").count() == 0


def test_a_call_declined_in_another_window_shows_rejected_live_and_after_a_reload(
    page: Any, served: Served
) -> None:
    server, fake, workspace = served
    fake.script(
        Reply(tool_calls=[Call("delete_file", {"path": "README.md"})]),
        Reply(content="All right, I left it."),
    )
    send(page, "delete the readme")
    page.wait_for_selector(".tool-card[data-state=approval] .tool-approval")
    call_id = page.get_attribute(".tool-card[data-tool=delete_file]", "data-call-id")
    with connected(server.url) as other:  # this tab never answers: its result event says so
        [running] = other.call("list_conversations", {})["running"]
        payload = {"conversation_id": running, "call_id": call_id, "approved": False}
        assert other.call("approve", payload)["ok"]
    wait_tasks_ended(page, 1)
    card = ".tool-card[data-tool=delete_file]"
    for shown in ("live", "reloaded"):
        assert page.get_attribute(card, "data-state") == "rejected", shown
        assert page.locator(f"{card} .tool-badge").inner_text() == "rejected", shown
        if shown == "live":
            page.reload()
            page.wait_for_selector(".assistant-message:has-text('All right, I left it.')")
    assert (workspace / "README.md").exists()


def test_always_allow_skips_the_second_approval(page: Any, served: Served) -> None:
    _, fake, _ = served
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo one"})]),
        Reply(content="First."),
    )
    send(page, "run one")
    page.check("[data-testid=approve-always]")
    page.click("[data-testid=approve]")
    wait_tasks_ended(page, 1)
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo two"})]),
        Reply(content="Second."),
    )
    send(page, "run two")
    wait_tasks_ended(page, 2)
    cards = page.locator(".tool-card[data-tool=run_command]")
    assert cards.count() == 2
    assert cards.nth(1).get_attribute("data-state") == "ok"
    assert cards.nth(1).locator(".tool-approval").count() == 0


def propose(page: Any, fake: FakeLLM, content: str, ended: int) -> Any:
    """One task that proposes `content` for notes.txt; returns its proposal box."""
    fake.script(
        Reply(tool_calls=[Call("propose_edit", {"path": "notes.txt", "new_content": content})]),
        Reply(content="Proposed."),
    )
    send(page, f"propose {content.strip()}")
    wait_tasks_ended(page, ended)
    box = page.locator(".proposal").nth(ended - 1)
    box.wait_for()
    assert box.get_attribute("data-state") == "pending"
    return box


def test_reviewed_edits_apply_discard_and_conflict(page: Any, served: Served) -> None:
    _, fake, workspace = served
    notes = workspace / "notes.txt"
    box = propose(page, fake, "hello\n", 1)
    assert box.locator(".diff-add").inner_text().strip() == "+hello"
    box.locator("[data-testid=diff-toggle]").click()
    assert box.locator(".diff-split .split-text.diff-add").inner_text() == "hello"
    assert not notes.exists()
    box.locator("[data-testid=apply-edit]").click()
    box.locator("[data-testid=proposal-outcome]:has-text('Applied')").wait_for()
    assert notes.read_text() == "hello\n"
    page.wait_for_selector('#file-tree [data-path="notes.txt"]')

    box = propose(page, fake, "discard me\n", 2)
    box.locator("[data-testid=discard-edit]").click()
    box.locator("[data-testid=proposal-outcome]:has-text('Discarded')").wait_for()
    assert notes.read_text() == "hello\n"

    box = propose(page, fake, "too late\n", 3)
    notes.write_text("changed by hand\n")
    box.locator("[data-testid=apply-edit]").click()
    box.locator(".proposal-error:has-text('changed since')").wait_for()
    assert box.locator("[data-testid=apply-edit]").is_disabled()
    assert notes.read_text() == "changed by hand\n"
    box.locator("[data-testid=discard-edit]").click()
    box.locator("[data-testid=proposal-outcome]:has-text('Discarded')").wait_for()

    page.reload()
    page.locator(".proposal").nth(2).wait_for(state="attached")
    assert page.locator("[data-testid=apply-edit]").count() == 0
    assert page.locator(".proposal[data-state=closed]").count() == 3
    page.wait_for_selector("[data-testid=undo-task]")  # the applied edit's task


def test_undo_this_task_restores_the_workspace(page: Any, served: Served) -> None:
    _, fake, workspace = served
    fake.script(
        Reply(
            tool_calls=[
                Call("create_file", {"path": "fresh.txt", "content": "new\n"}),
                Call(
                    "modify_file",
                    {
                        "path": "README.md",
                        "operation": "replace",
                        "old_text": "# demo",
                        "new_text": "# changed",
                    },
                ),
            ]
        ),
        Reply(content="Changed both."),
    )
    send(page, "change things")
    approval = page.locator(".tool-card[data-state=approval] .tool-approval")
    assert approval.locator(".diff-del").inner_text().strip() == "-# demo"
    assert approval.locator(".diff-add").inner_text().strip() == "+# changed"
    page.click("[data-testid=approve]")
    wait_tasks_ended(page, 1)
    page.wait_for_selector('#file-tree [data-path="fresh.txt"]')
    assert (workspace / "README.md").read_text() == "# changed\n"

    page.click("[data-testid=undo-task]")
    page.click("[data-testid=undo-dialog] button:text-is('Undo')")  # after the list of files
    notice = page.locator("[data-testid=undo-notice]")
    notice.locator("code:has-text('fresh.txt')").wait_for()
    assert "README.md" in notice.inner_text()
    assert page.locator("[data-testid=undo-task]").is_disabled()
    page.wait_for_selector('#file-tree [data-path="fresh.txt"]', state="detached")
    assert not (workspace / "fresh.txt").exists()
    assert (workspace / "README.md").read_text() == "# demo\n"

    page.wait_for_selector('#file-tree [data-path$=".undo"]', state="detached")
    page.click(".tool-card[data-tool=modify_file] .tool-head")
    page.click("[data-testid=sandbox-status]")
    page.wait_for_selector("[data-testid=sandbox-details] li")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "safety.png"))


def test_stop_while_waiting_for_approval_ends_the_task(page: Any, served: Served) -> None:
    _, fake, workspace = served
    fake.script(Reply(tool_calls=[Call("run_command", {"command": "echo no > never.txt"})]))
    send(page, "wait for me")
    page.wait_for_selector("[data-testid=approve]")
    page.click("#stop-button")
    page.wait_for_selector('.task-end[data-reason="cancelled"]')
    assert page.locator("[data-testid=approve]").is_disabled()
    assert page.locator("#stop-button").is_hidden()
    assert not (workspace / "never.txt").exists()


def test_status_bar_shows_the_sandbox(page: Any, served: Served) -> None:
    server, _, _ = served
    with connected(server.url) as client:
        sandbox = client.call("get_status")["sandbox"]
    button = page.locator("[data-testid=sandbox-status]")
    assert sandbox["kind"] in button.inner_text()
    assert f"network {sandbox['network']}" in button.inner_text()
    exposed = any(line.startswith("not isolated") for line in sandbox["isolation"])
    weak = exposed or sandbox["network"] == "host"
    assert button.get_attribute("data-level") == ("warn" if weak else "ok")
    button.hover()
    details = page.locator("[data-testid=sandbox-details]")
    details.wait_for()
    assert details.locator("li").all_inner_texts() == sandbox["isolation"]


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A socket on loopback that records the path of every request it gets. Its teardown waits
    on nothing (shutting the socket down ends the accepting thread): in one CI run the worker's
    threading waited on an eventlet semaphore and http.server's shutdown() hung."""
    seen: list[str] = []
    server = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = server.accept()
                with connection:
                    connection.settimeout(5)
                    head = connection.recv(65536).decode("latin-1").split(" ")
                    seen.append(head[1] if len(head) > 1 else "")
                    connection.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], seen
    server.shutdown(socket.SHUT_RDWR)
    server.close()


def test_remote_images_become_links_and_nothing_is_fetched(
    page: Any, served: Served, listener: tuple[int, list[str]]
) -> None:
    _, fake, _ = served
    port, seen = listener
    leak = f"http://127.0.0.1:{port}/leak?data=SECRET"
    fake.script(
        Reply(
            content=(
                f"Here is the chart: ![chart]({leak})\n\n"
                f'<img src="http://127.0.0.1:{port}/raw" alt="raw"> and '
                f'<p style="background:url(http://127.0.0.1:{port}/css)">styled</p>'
            )
        )
    )
    send(page, "show me a chart")
    link = page.locator("a.remote-image").first
    link.wait_for()
    wait_tasks_ended(page, 1)
    assert link.get_attribute("href") == leak and "chart" in link.inner_text()
    assert page.locator(".assistant-message img").count() == 0
    assert seen == [], f"the page fetched {seen}"
    urllib.request.urlopen(f"http://127.0.0.1:{port}/probe", timeout=10).close()
    assert seen == ["/probe"]  # the recorder sees what is fetched
    policy = page.evaluate("fetch('/').then(r => r.headers.get('content-security-policy'))")
    assert "img-src 'self' data:" in policy


def test_an_approval_shows_what_a_command_hides(page: Any, served: Served) -> None:
    _, fake, workspace = served
    (workspace / "important").mkdir(exist_ok=True)
    hidden = "echo hello" + "\n" * 120 + "rm -rf ./important\x1b[1A\x1b[2K"
    fake.script(Reply(tool_calls=[Call("run_command", {"command": hidden})]), Reply(content="ok"))
    send(page, "say hello")
    approval = page.locator(".tool-card[data-state=approval] .tool-approval")
    warnings = approval.locator(".approval-warnings").inner_text()
    assert "119 blank lines in a row" in warnings and "ESC ×2" in warnings
    assert "rm -rf" not in approval.locator(".approval-preview").inner_text()
    page.click("[data-testid=approval-more]")
    shown = approval.locator(".approval-preview").inner_text()
    assert "rm -rf ./important⟨ESC⟩[1A⟨ESC⟩[2K" in shown
    page.click("[data-testid=reject]")
    page.wait_for_selector(".approval-decision.rejected")
    wait_tasks_ended(page, 1)
    assert (workspace / "important").is_dir()


def test_the_debug_page_works_under_the_policy(browser: Any, served: Served) -> None:
    """Opened by its own link (`?token=` opens /debug as it does /): loading the workspace
    page first, only to leave it, cost every run a page load of ~85 modules."""
    # What the policy refuses is logged as a console error, which open_page does not allow.
    with open_page(
        browser, served, ready=[], path="/debug", viewport={"width": 1400, "height": 1000}
    ) as page:
        page.wait_for_selector("#poll-status:has-text('Updated')")
        page.wait_for_selector("#pane-agent .line")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root is refused commands without bubblewrap")
def test_the_page_says_when_commands_are_refused(
    browser: Any, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    env = {"AGENT_SANDBOX": "local", "AGENT_LOCAL_SANDBOX_BUBBLEWRAP": "false"}
    with (
        serving(tmp_path, fake_llm, env, {}) as server,
        open_page(browser, (server, fake_llm, server.workspace), ready=["#file-tree"]) as page,
    ):
        button = page.locator("[data-testid=sandbox-status]")
        page.wait_for_function(
            "() => document.querySelector('[data-testid=sandbox-status]')"
            ".textContent.includes('commands refused')"
        )
        assert button.get_attribute("data-level") == "warn"
        button.hover()
        refusal = page.locator("[data-testid=sandbox-details] li.warn")
        refusal.wait_for()
        assert "apt-get install bubblewrap" in refusal.inner_text()
