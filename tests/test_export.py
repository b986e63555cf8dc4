"""A conversation exported, through the real server on the fake model: the HTTP route (token,
format, a file name from the title) and workspace_client give Markdown with each user and
assistant message and the tool calls summarised a line each, and JSON of the meta and the
records as stored that round-trips; the page downloads both from the conversation's menu (in
a real headless Chromium); `cli --server` in tmux writes `/export` to a new file where the user
says, never over one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.browser import Served, open_page
from tests.kit.clients import EventClient
from tests.kit.server import REPO, ServerProcess, agent_argv, agent_env
from tests.kit.settings import TOKEN
from tests.kit.tty import Tmux, needs_tmux
from workspace_client import Client, WorkspaceError

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(files={"a.txt": "alpha\n"}),
]
TITLE = "Alpha: notes / today"
FILE_NAME = "Alpha-notes-today"
READ = Call("read_file", {"path": "a.txt"})


def _script(fake: FakeLLM) -> None:
    fake.script(
        Reply(content="Let me read it.", tool_calls=[READ]),
        Reply(content="It says **alpha**."),
    )


def _conversation(server: ServerProcess, fake: FakeLLM, client: EventClient) -> str:
    _script(fake)
    cid = client.start("What is in a.txt?")
    client.wait_done(cid, timeout=60)
    assert client.call("rename_conversation", {"conversation_id": cid, "title": TITLE})["ok"]
    return cid


def _assert_markdown(text: str, title: str) -> None:
    assert text.startswith(f"# {title}\n")
    assert "## You\n\nWhat is in a.txt?\n" in text
    assert "## Assistant\n\nLet me read it.\n- tool `read_file` `" in text
    assert '{"path": "a.txt"}` → ok: ' in text and "alpha" in text.split("→ ok: ", 1)[1]
    assert "## Assistant\n\nIt says **alpha**.\n" in text
    assert text.count("## You") == 1 and text.count("## Assistant") == 2


def test_the_route_and_the_client_export_markdown_and_json(
    server: ServerProcess, fake: FakeLLM, client: EventClient
):
    cid = _conversation(server, fake, client)
    with Client(server.url, TOKEN) as library:
        markdown = library.export_conversation(cid, "md")
        exported = json.loads(library.export_conversation(cid, "json"))
        with pytest.raises(WorkspaceError) as refused:
            library.export_conversation(cid, "pdf")
        assert refused.value.code == "bad_request"
    _assert_markdown(markdown, TITLE)

    stored = server.data_dir / "conversations" / cid / "messages.jsonl"
    records = [json.loads(line) for line in stored.read_text().splitlines()]
    assert exported["messages"] == records  # one branch: the path is every record, as stored
    assert [r["role"] for r in records] == ["user", "assistant", "tool", "assistant"]
    assert exported["conversation"]["id"] == cid and exported["conversation"]["title"] == TITLE

    url = f"{server.url}/api/conversations/{cid}/export"
    answer = requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert answer.status_code == 200 and answer.text == markdown
    assert answer.headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert answer.headers["Content-Disposition"] == (
        f"attachment; filename=\"{FILE_NAME}.md\"; filename*=UTF-8''{FILE_NAME}.md"
    )
    assert requests.get(url, timeout=30).status_code == 401
    missing = requests.get(
        f"{server.url}/api/conversations/nope/export?format=json",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


# The menu lies inside the sidebar, whole.
MENU_INSIDE = """() => {
  const menu = document.querySelector("[data-testid=conversation-actions]").getBoundingClientRect();
  const bar = document.querySelector("#sidebar").getBoundingClientRect();
  return menu.left >= bar.left && menu.right <= bar.right;
}"""


@pytest.mark.browser
def test_the_page_downloads_both_from_the_conversations_menu(
    browser: Any, served: Served, client: EventClient
):
    server, fake, _ = served
    cid = _conversation(server, fake, client)
    ready = [f'.conv-item[data-conversation-id="{cid}"]']
    with open_page(browser, served, ready=ready) as page:  # a pointer that hovers
        row = page.locator(".conv-row", has=page.locator(f'[data-conversation-id="{cid}"]'))
        for fmt in ("md", "json"):
            row.hover()
            row.locator("[data-testid=export-conversation]").click()
            assert page.evaluate(MENU_INSIDE)
            text = _downloaded(page, row, fmt)
            if fmt == "md":
                _assert_markdown(text, TITLE)
            else:
                assert json.loads(text)["messages"][0]["content"] == "What is in a.txt?"
    phone = {"width": 390, "height": 844}
    with open_page(  # taps alone
        browser, served, ready=["#status-bar"], viewport=phone, is_mobile=True, has_touch=True
    ) as page:
        page.locator("[data-testid=sidebar-toggle]").tap()
        row = page.locator(".conv-row", has=page.locator(f'[data-conversation-id="{cid}"]'))
        row.locator("[data-testid=conversation-menu]").tap()
        row.locator("[data-testid=menu-export]").tap()
        assert page.evaluate(MENU_INSIDE)
        _assert_markdown(_downloaded(page, row, "md"), TITLE)


def _downloaded(page: Any, row: Any, fmt: str) -> str:
    """Pick `fmt` in the row's open menu; the text of the file downloaded, named from the title."""
    with page.expect_download() as started:
        row.locator(f"[data-testid=menu-export-{fmt}]").click()
    assert started.value.suggested_filename == f"{FILE_NAME}.{fmt}"
    page.wait_for_selector("[data-testid=conversation-actions]", state="detached")
    return Path(started.value.path()).read_text(encoding="utf-8")


@needs_tmux()
def test_the_terminal_exports_to_a_new_file_where_the_user_says(
    server: ServerProcess, fake: FakeLLM, tmp_path: Path
):
    env = {**agent_env(fake.base_url, fake.api_key), "AGENT_WEB_TOKEN": TOKEN}
    argv = [sys.executable, str(REPO / "main.py"), "cli", "--server", server.url]
    (tmp_path / "out").mkdir()
    with Tmux(argv, env=env, cwd=tmp_path) as term:
        term.wait_for("/help for commands")
        _script(fake)
        term.type("What is in a.txt?")
        term.wait_for(lambda s: "It says" in s and s.rstrip().endswith("›"))
        term.type("/export")
        term.wait_for(f"exported as Markdown to {tmp_path}/What-is-in-a.txt.md")
        term.type("/export json out")
        term.wait_for(f"exported as JSON to {tmp_path}/out/What-is-in-a.txt.json")
        term.type("/export md out/What-is-in-a.txt.json")
        term.wait_for("What-is-in-a.txt.json exists: name another file")
        term.keys("C-d")
        term.wait_for("[exit 0]")
    _assert_markdown((tmp_path / "What-is-in-a.txt.md").read_text(), "What is in a.txt?")
    exported = json.loads((tmp_path / "out" / "What-is-in-a.txt.json").read_text())
    assert [m["role"] for m in exported["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert (tmp_path / "out" / "What-is-in-a.txt.json").stat().st_mode & 0o777 == 0o600


@needs_tmux()
def test_the_local_terminal_exports_its_own_history(fake: FakeLLM, tmp_path: Path):
    workspace, data, out = tmp_path / "ws", tmp_path / "data", tmp_path / "out"
    workspace.mkdir()
    out.mkdir()
    (workspace / "a.txt").write_text("alpha\n")
    env = agent_env(fake.base_url, fake.api_key)
    with Tmux(agent_argv("cli", workspace, data), env=env, cwd=out) as term:
        term.wait_for("/help for commands")
        term.type("/export")
        term.wait_for("no conversation to export yet")
        _script(fake)
        term.type("What is in a.txt?")
        term.wait_for(lambda s: "It says" in s and s.rstrip().endswith("›"))
        term.type("/export md notes.md")
        term.wait_for(f"exported as Markdown to {out}/notes.md")
        term.keys("C-d")
        term.wait_for("[exit 0]")
    _assert_markdown((out / "notes.md").read_text(), "What is in a.txt?")
    assert not list(workspace.glob("*.md")), "nothing is written in the workspace"
