"""Attaching files in the page (the attach button with its progress bar, a drop), the tree
showing them at once, chips that survive a reload, the Markdown preview and `path:line` links."""

from __future__ import annotations

import pytest

from tests.fake_llm import Call, Reply
from tests.kit.settings import TOKEN

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(files={"README.md": "# demo\n\nSome *words*.\n"}),
]

DROP_FILE = """([name, text]) => {
  const transfer = new DataTransfer();
  transfer.items.add(new File([text], name, { type: "text/markdown" }));
  const zone = document.querySelector(".main");
  for (const type of ["dragenter", "dragover", "drop"]) {
    const init = { dataTransfer: transfer, bubbles: true, cancelable: true };
    zone.dispatchEvent(new DragEvent(type, init));
  }
}"""


def test_attached_and_dropped_files_upload_show_in_the_tree_and_go_with_the_message(served, page):
    server, fake, _ = served
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_selector('#file-tree [data-path="README.md"]')

    big = ("a line of the big log file\n" * 120_000).encode()  # about 3 MB
    page.set_input_files(
        "#attach-input", files=[{"name": "big log.txt", "mimeType": "text/plain", "buffer": big}]
    )
    chip = page.locator('#attachment-tray [data-path="uploads/big_log.txt"]')
    chip.wait_for()
    assert chip.get_attribute("data-state") == "ready"
    progress = chip.locator("progress")
    assert int(chip.get_attribute("data-progress-events") or 0) >= 1
    assert progress.evaluate("bar => bar.value === bar.max && bar.max >= 3000000")
    page.wait_for_selector('#file-tree [data-path="uploads/big_log.txt"]')  # revealed: visible

    page.evaluate(DROP_FILE, ["notes.md", "# Notes\n\nbuy **milk**\n"])
    page.wait_for_selector('#attachment-tray [data-path="uploads/notes.md"][data-state="ready"]')
    page.wait_for_selector('#file-tree [data-path="uploads/notes.md"]')
    assert (server.workspace / "uploads" / "notes.md").read_text() == "# Notes\n\nbuy **milk**\n"

    page.set_input_files(
        "#attach-input",
        files=[{"name": "fake.pdf", "mimeType": "application/pdf", "buffer": b"not a pdf"}],
    )
    refused = page.locator('#attachment-tray [data-state="error"]')
    refused.wait_for()
    assert "the name says PDF" in refused.inner_text()
    refused.get_by_role("button").click()

    fake.script(Reply(content="Noted."))
    page.fill("#message-input", "what is in these?")
    page.press("#message-input", "Enter")
    page.wait_for_selector(".assistant-message:has-text('Noted.')")
    sent = fake.chat_requests[-1].messages[-1]["content"]
    assert sent.startswith("what is in these?\n\n[Attached file uploads/big_log.txt")
    assert "buy **milk**" in sent
    assert page.locator("#attachment-tray .attachment-chip").count() == 0

    page.reload()
    chips = page.locator('.user-message .message-attachments [data-path="uploads/notes.md"]')
    chips.wait_for()
    chips.click()
    page.wait_for_selector('#file-preview [data-testid="markdown-preview"] strong:has-text("milk")')
    page.click('#file-preview [data-testid="preview-toggle"]')
    page.wait_for_selector("#file-preview .code-line:has-text('buy **milk**')")
    unexpected = [e for e in page.console_errors if "415" not in e]
    assert unexpected == []  # the refused fake.pdf is the browser's one logged failure


def test_a_path_and_line_in_a_tool_result_opens_the_preview_there(served, page):
    server, fake, _ = served
    (server.workspace / "long.py").write_text("".join(f"x{n} = {n}\n" for n in range(1, 200)))
    fake.script(
        Reply(tool_calls=[Call("search_code", {"query": "x150 ="})]), Reply(content="Found it.")
    )
    page.goto(f"{server.url}/?token={TOKEN}")
    page.fill("#message-input", "where is x150?")
    page.press("#message-input", "Enter")
    page.wait_for_selector(".assistant-message:has-text('Found it.')")
    card = page.locator(".tool-card").first
    card.locator(".tool-head, summary, header").first.click()
    link = page.locator('.tool-output .path-link[data-path="long.py"][data-line="150"]')
    link.click()
    target = page.locator("#file-preview .code-line.target-line")
    target.wait_for()
    assert "x150 = 150" in target.inner_text()
    download = page.get_attribute('#file-preview [data-testid="preview-download"]', "href")
    assert download == "/api/download?path=long.py"
    assert page.console_errors == []
