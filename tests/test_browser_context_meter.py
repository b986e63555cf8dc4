"""The context meter in a real headless Chromium: it says what it measures, follows the
provider's counts, and never goes down during a task, whichever way the estimates are wrong."""

from __future__ import annotations

import re

import pytest

from tests.fake_llm import Call, Reply
from tests.kit.settings import TOKEN

pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        files={"README.md": "# notes\n" + "A line of notes about the garden.\n" * 40}
    ),
]

# Every figure the meter's tooltip gave, in order, recorded in the page.
RECORD_FIGURES = """() => {
  window.meterFigures = [];
  const meter = document.querySelector('#context-meter');
  new MutationObserver(() => {
    const match = /^Context: ([\\d,]+) of/.exec(meter.title);
    if (match) window.meterFigures.push(Number(match[1].replaceAll(',', '')));
  }).observe(meter, {attributes: true, attributeFilter: ['title']});
}"""


def _task(page, text: str, ends: int) -> list[int]:
    """Send `text`, wait for the task's end line (the `ends`th), and give the meter's figures."""
    page.evaluate(RECORD_FIGURES)
    page.fill("#message-input", text)
    page.press("#message-input", "Enter")
    page.wait_for_selector(f".task-end >> nth={ends - 1}", state="attached")
    return page.evaluate("window.meterFigures")


def _tooltip_figure(page) -> int:
    match = re.match(r"Context: ([\d,]+) of", page.get_attribute("#context-meter", "title") or "")
    assert match, page.get_attribute("#context-meter", "title")
    return int(match[1].replace(",", ""))


def test_the_meter_grows_during_a_task_and_shows_the_providers_count(served, page):
    server, fake, _ = served
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_selector("#reconnect-banner[data-state]", state="attached")
    title = page.get_attribute("#context-meter", "title") or ""
    assert "Tokens the model sees on its next call" in title, title

    # The provider counts far less than the estimate: each count used to lower the estimate
    # of the next call below the figure shown before it.
    fake.script(
        Reply(tool_calls=[Call("list_files", {})], usage=(400, 20)),
        Reply(tool_calls=[Call("read_file", {"path": "README.md"})], usage=(450, 20)),
        Reply(content="The notes are about the garden.", usage=(900, 30)),
    )
    figures = _task(page, "what are the notes about?", 1)
    assert len(figures) >= 3, figures
    assert figures == sorted(figures), f"the meter went down during the task: {figures}"

    # The provider counts more than the estimate: the figure follows its counts, the answer
    # included, and keeps growing.
    fake.script(
        Reply(tool_calls=[Call("read_file", {"path": "README.md"})], usage=(9000, 50)),
        Reply(content="Still the garden.", usage=(9400, 60)),
    )
    figures = _task(page, "read it again", 2)
    assert figures == sorted(figures), f"the meter went down during the task: {figures}"
    assert 9050 in figures, figures  # after the first call: its prompt and its answer
    # the second call's figure (9,000 and an estimate of the file read again) stays when its
    # own count (9,400 and 60 out) comes lower
    assert figures[-1] == _tooltip_figure(page) >= 9460, figures
    assert page.inner_text("#context-meter .meter-text").startswith("9.")
    usage_title = page.get_attribute(".task-end >> nth=1 >> .task-usage", "title") or ""
    assert "added up" in usage_title and page.inner_text(".task-end >> nth=1 >> .task-usage") == (
        "18k in · 110 out"
    )
    assert page.console_errors == []
